//! Watches: a long-lived chunked response of `{"type": ..., "object": ...}` lines, fed from
//! the store's history (for a resumed watch) and then from its broadcast of new writes.
//! Filtering by namespace and selectors happens here, including the upstream rule that an
//! object leaving a selector is a DELETED event and one entering it is ADDED.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc};

use crate::api::{partial_metadata, ListOptions, Sim};
use crate::request::{ApiRequest, ApiResponse, Body, Representation};
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult};
use crate::store::{Event, EventType};

/// How often a watch that allows bookmarks gets one when nothing else happens.
const BOOKMARK_EVERY: Duration = Duration::from_secs(5);

/// How long a watch lasts for its `timeoutSeconds`: as asked when positive; a negative one
/// ends it at once; none or zero, the server's minimum request timeout (1800 s).
fn watch_timeout(timeout_seconds: Option<i64>) -> Duration {
    match timeout_seconds {
        Some(t) if t > 0 => Duration::from_secs(t as u64),
        Some(t) if t < 0 => Duration::ZERO,
        _ => Duration::from_secs(1800),
    }
}

pub fn start(
    sim: Arc<Sim>,
    def: Arc<ResourceDef>,
    ns: Option<&str>,
    req: &ApiRequest,
) -> ApiResult<ApiResponse> {
    if !def.has_verb("watch") {
        return Err(ApiError::method_not_allowed("watch"));
    }
    let opts = sim.list_options(&def, req)?;
    let from = match opts.resource_version.as_deref() {
        None | Some("0") => None,
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?,
        ),
    };
    let timeout = watch_timeout(crate::query_options::list_numbers(req)?.timeout_seconds);
    let w = Watcher {
        sim: sim.clone(),
        def: def.clone(),
        namespace: ns.map(String::from),
        opts,
        representation: req.wants(),
        bookmarks: req.flag("allowWatchBookmarks"),
        sent_headers: false,
    };
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let user_agent = req.user_agent.clone();
    // Subscribe now (not in the task) so that nothing written after this request is missed.
    let initial = match from {
        None => {
            let (rv, items, receiver) = sim.store.watch_now(&def.key());
            Ok((rv, items, Vec::new(), receiver))
        }
        Some(rv) => sim
            .store
            .watch_from(&def.key(), rv)
            .map(|s| (rv, Vec::new(), s.backlog, s.receiver)),
    };
    tokio::spawn(async move {
        let _guard = sim.metrics.watch_opened(&w.def, &user_agent);
        let drop_signal = sim.faults.watch_drops();
        let mut w = w;
        let (mut last_rv, items, backlog, mut receiver) = match initial {
            Ok(x) => x,
            Err(_) => {
                let status =
                    ApiError::expired("The resourceVersion for the provided watch is too old.")
                        .to_status();
                let _ = tx.send(line("ERROR", status)).await;
                return;
            }
        };
        for obj in items {
            if w.in_scope(&obj) {
                if let Some(b) = w.render("ADDED", &obj) {
                    if tx.send(b).await.is_err() {
                        return;
                    }
                }
            }
        }
        for ev in backlog {
            last_rv = ev.rv;
            if let Some(b) = w.event(&ev) {
                if tx.send(b).await.is_err() {
                    return;
                }
            }
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut drop_signal = drop_signal;
        let mut tick = tokio::time::interval(BOOKMARK_EVERY);
        tick.tick().await;
        loop {
            tokio::select! {
                r = receiver.recv() => match r {
                    Ok(ev) => {
                        if ev.rv <= last_rv { continue; }
                        last_rv = ev.rv;
                        if let Some(b) = w.event(&ev) {
                            if tx.send(b).await.is_err() { return; }
                        }
                    }
                    // A watcher too slow for the broadcast is closed, as kube-apiserver closes
                    // watchers whose buffers overflow; the client re-watches from its last RV.
                    Err(broadcast::error::RecvError::Lagged(_)) => return,
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = tick.tick(), if w.bookmarks => {
                    // Everything up to the store's current RV has been broadcast; drain it first.
                    let rv = w.sim.store.current_rv();
                    while let Ok(ev) = receiver.try_recv() {
                        if ev.rv <= last_rv { continue; }
                        last_rv = ev.rv;
                        if let Some(b) = w.event(&ev) {
                            if tx.send(b).await.is_err() { return; }
                        }
                    }
                    last_rv = last_rv.max(rv);
                    let bm = json!({"kind": w.def.kind, "apiVersion": w.def.api_version(),
                                    "metadata": {"resourceVersion": last_rv.to_string(), "creationTimestamp": null}});
                    if tx.send(line("BOOKMARK", bm)).await.is_err() { return; }
                }
                _ = &mut deadline => return,
                _ = drop_signal.changed() => return,
                _ = tx.closed() => return,
            }
        }
    });
    let mut resp = ApiResponse::json(200, Value::Null);
    resp.body = Body::Stream(rx);
    Ok(resp)
}

struct Watcher {
    sim: Arc<Sim>,
    def: Arc<ResourceDef>,
    namespace: Option<String>,
    opts: ListOptions,
    representation: Representation,
    bookmarks: bool,
    sent_headers: bool,
}

impl Watcher {
    fn in_scope(&self, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace {
            if obj["metadata"]["namespace"].as_str() != Some(ns) {
                return false;
            }
        }
        self.sim.selected(&self.def, &self.opts, obj)
    }

    fn event(&mut self, ev: &Event) -> Option<Bytes> {
        if ev.res != self.def.key() {
            return None;
        }
        let now_in = self.in_scope(&ev.object);
        let was_in = ev.old.as_ref().map(|o| self.in_scope(o));
        let ty = match (ev.kind, now_in, was_in) {
            (EventType::Deleted, _, Some(true)) => "DELETED",
            (EventType::Deleted, _, _) => return None,
            (EventType::Added, true, _) => "ADDED",
            (EventType::Modified, true, Some(true)) => "MODIFIED",
            (EventType::Modified, true, _) => "ADDED",
            (EventType::Modified, false, Some(true)) => {
                let mut old = (**ev.old.as_ref()?).clone();
                old["metadata"]["resourceVersion"] = json!(ev.rv.to_string());
                return self.render("DELETED", &old);
            }
            _ => return None,
        };
        self.render(ty, &ev.object)
    }

    fn render(&mut self, ty: &str, obj: &Value) -> Option<Bytes> {
        let shown = match self.representation {
            Representation::Metadata => partial_metadata(&self.sim.served_metadata(&self.def, obj)),
            Representation::Table => {
                let headers = !self.sent_headers;
                self.sent_headers = true;
                let o = self.sim.table_source(&self.def, obj);
                self.sim.table(
                    &self.def,
                    &[o],
                    headers,
                    obj["metadata"]["resourceVersion"].as_str().unwrap_or(""),
                    None,
                )
            }
            _ => self.sim.present(&self.def, obj),
        };
        Some(line(ty, shown))
    }
}

fn line(ty: &str, object: Value) -> Bytes {
    let mut s = json!({"type": ty, "object": object}).to_string();
    s.push('\n');
    Bytes::from(s)
}

#[cfg(test)]
mod tests {
    use super::watch_timeout;
    use std::time::Duration;

    #[test]
    fn a_watch_lasts_its_timeout_or_the_minimum_request_timeout() {
        for (asked, lasts) in [(None, 1800), (Some(0), 1800), (Some(5), 5), (Some(-1), 0)] {
            assert_eq!(
                watch_timeout(asked),
                Duration::from_secs(lasts),
                "{asked:?}"
            );
        }
    }
}
