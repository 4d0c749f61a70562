//! Supervision of the launcher's children (the informer-server and the workers), each
//! the launcher's own binary re-executed with a subcommand, so `ps` shows
//! `rkcm worker --group NAME`:
//!
//! - a child that exits is started again after a backoff of 1 s doubling to 5 min,
//!   reset once it has run for 10 minutes; a crash-looping child never affects the
//!   others;
//! - its stdout and stderr are forwarded line by line, prefixed with its name;
//! - children die with the launcher (PR_SET_PDEATHSIG), so a SIGKILLed launcher never
//!   leaves workers running without a lease, and run in their own process group, so a
//!   terminal's Ctrl-C reaches the launcher alone;
//! - stopping sends SIGTERM and waits a bounded time, then SIGKILL.

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::watch;
use tracing::{info, warn};

pub(crate) const BACKOFF_INITIAL: Duration = Duration::from_secs(1);
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(300);
pub(crate) const HEALTHY_RESET: Duration = Duration::from_secs(600);

#[derive(Clone, Debug)]
pub(crate) struct ChildSpec {
    /// `informer-server`, `worker-default`, `worker-default-1` (shards).
    pub name: String,
    pub args: Vec<String>,
    /// The flag that takes its health/metrics address (`--metrics-bind-address`), if it
    /// has one: each start gets a free loopback port for it, so a port another process
    /// took since the last start (a restart, a second launcher on the machine) is never
    /// retried forever.
    pub http_flag: Option<&'static str>,
    pub envs: Vec<(String, String)>,
}

/// A supervised child: its restarts and whether it is running now.
pub(crate) struct Supervised {
    pub spec: ChildSpec,
    /// Where the running (or last) child's health/metrics endpoint listens (HOST:PORT).
    http: Mutex<Option<String>>,
    pub restarts: AtomicU64,
    pub running: AtomicBool,
    /// `Some(grace)` once the child is to stop.
    stop: watch::Sender<Option<Duration>>,
    task: tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// The next wait: doubled, capped; back to the start after a long healthy run.
pub(crate) fn next_backoff(current: Duration, ran_for: Duration) -> Duration {
    if ran_for >= HEALTHY_RESET {
        return BACKOFF_INITIAL;
    }
    (current * 2).min(BACKOFF_MAX)
}

/// A loopback port nothing listens on now. The kernel may hand the same free port to
/// two binds in a row, so ports given out recently (to children starting at the same
/// moment) are not given again.
fn free_local_port() -> std::io::Result<String> {
    static RECENT: Mutex<std::collections::VecDeque<u16>> =
        Mutex::new(std::collections::VecDeque::new());
    let mut recent = RECENT.lock().unwrap_or_else(|e| e.into_inner());
    let mut last = None;
    for _ in 0..16 {
        let address = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        last = Some(address);
        if !recent.contains(&address.port()) {
            break;
        }
    }
    let address = last.ok_or_else(|| std::io::Error::other("no free port"))?;
    if recent.len() >= 64 {
        recent.pop_front();
    }
    recent.push_back(address.port());
    Ok(address.to_string())
}

fn spawn(spec: &ChildSpec, http: Option<&str>) -> std::io::Result<Child> {
    // The running binary itself, even after the file on disk was replaced (an upgrade in
    // place, a rebuild): /proc/self/exe still names it, where the path would now name
    // nothing or another version. `ps` shows the path the launcher was started as.
    let started_as = std::env::current_exe()?;
    let shown = started_as
        .to_string_lossy()
        .trim_end_matches(" (deleted)")
        .to_string();
    let mut command = Command::new("/proc/self/exe");
    command
        .arg0(shown)
        .args(&spec.args)
        .args(
            spec.http_flag
                .zip(http)
                .into_iter()
                .flat_map(|(flag, address)| [flag, address]),
        )
        .envs(spec.envs.iter().cloned())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    die_with_parent_in_own_group(&mut command);
    let mut child = command.spawn()?;
    for (stream, is_err) in [
        (
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
            false,
        ),
        (
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
            true,
        ),
    ] {
        let Some(stream) = stream else { continue };
        let name = spec.name.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stream).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if is_err {
                    eprintln!("[{name}] {line}");
                } else {
                    println!("[{name}] {line}");
                }
            }
        });
    }
    Ok(child)
}

/// The child gets SIGKILL when the launcher dies, and its own process group, so a
/// terminal's Ctrl-C reaches only the launcher, which stops its children in order.
pub(crate) fn die_with_parent_in_own_group(command: &mut Command) {
    // SAFETY: prctl and setpgid are async-signal-safe; nothing else runs between fork
    // and exec.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn signal(child: &Child, signal: i32) {
    if let Some(pid) = child.id() {
        // SAFETY: kill(2) on our own child's pid.
        #[allow(unsafe_code)]
        unsafe {
            libc::kill(pid as i32, signal);
        }
    }
}

impl Supervised {
    /// Starts supervising `spec`.
    pub(crate) fn start(spec: ChildSpec) -> Arc<Supervised> {
        let (stop, mut stopped) = watch::channel(None::<Duration>);
        let supervised = Arc::new(Supervised {
            spec,
            http: Mutex::new(None),
            restarts: AtomicU64::new(0),
            running: AtomicBool::new(false),
            stop,
            task: tokio::sync::Mutex::new(None),
        });
        let this = supervised.clone();
        let task = tokio::spawn(async move {
            let mut backoff = BACKOFF_INITIAL;
            let mut first = true;
            loop {
                if stopped.borrow().is_some() {
                    return;
                }
                if !first {
                    this.restarts.fetch_add(1, Ordering::Relaxed);
                }
                first = false;
                let started = Instant::now();
                let http = match this.spec.http_flag.map(|_| free_local_port()).transpose() {
                    Ok(http) => http,
                    Err(error) => {
                        warn!(child = %this.spec.name, %error, retry_in = ?backoff, "cannot pick a port for the child's health endpoint");
                        tokio::select! {
                            _ = tokio::time::sleep(backoff) => {}
                            _ = stopped.changed() => return,
                        }
                        backoff = next_backoff(backoff, Duration::ZERO);
                        continue;
                    }
                };
                *this.http.lock().unwrap_or_else(|e| e.into_inner()) = http.clone();
                let mut child = match spawn(&this.spec, http.as_deref()) {
                    Ok(child) => child,
                    Err(error) => {
                        warn!(child = %this.spec.name, %error, retry_in = ?backoff, "cannot start child");
                        tokio::select! {
                            _ = tokio::time::sleep(backoff) => {}
                            _ = stopped.changed() => return,
                        }
                        backoff = next_backoff(backoff, Duration::ZERO);
                        continue;
                    }
                };
                this.running.store(true, Ordering::Relaxed);
                info!(child = %this.spec.name, pid = child.id().unwrap_or(0), "started");
                let status = tokio::select! {
                    status = child.wait() => status,
                    _ = stopped.changed() => {
                        let grace = stopped.borrow().unwrap_or_default();
                        signal(&child, libc::SIGTERM);
                        let status = match tokio::time::timeout(grace, child.wait()).await {
                            Ok(status) => status,
                            Err(_) => {
                                warn!(child = %this.spec.name, "did not stop within {grace:?}; killing it");
                                let _ = child.kill().await;
                                child.wait().await
                            }
                        };
                        this.running.store(false, Ordering::Relaxed);
                        info!(child = %this.spec.name, ?status, "stopped");
                        return;
                    }
                };
                this.running.store(false, Ordering::Relaxed);
                let ran_for = started.elapsed();
                backoff = if ran_for >= HEALTHY_RESET {
                    BACKOFF_INITIAL
                } else {
                    backoff
                };
                warn!(child = %this.spec.name, status = ?status.ok(), ran_for = ?ran_for, restart_in = ?backoff, "child exited; restarting");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stopped.changed() => return,
                }
                backoff = next_backoff(backoff, ran_for);
            }
        });
        if let Ok(mut slot) = supervised.task.try_lock() {
            *slot = Some(task);
        }
        supervised
    }

    /// SIGTERM, wait up to `grace`, SIGKILL; returns when the child is gone. A zero
    /// grace stops it at once (a lost lease).
    pub(crate) async fn stop(&self, grace: Duration) {
        let _ = self.stop.send(Some(grace));
        if let Some(task) = self.task.lock().await.take() {
            let _ = task.await;
        }
    }

    /// Where the child's health/metrics endpoint listens (HOST:PORT), once started.
    pub(crate) fn http_address(&self) -> Option<String> {
        self.http.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(crate) fn pid_running(&self) -> bool {
        self.running.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_five_minutes_and_resets_after_ten_healthy() {
        let mut wait = BACKOFF_INITIAL;
        let mut waits = vec![wait];
        for _ in 0..10 {
            wait = next_backoff(wait, Duration::from_secs(1));
            waits.push(wait);
        }
        assert_eq!(&waits[..4], &[1, 2, 4, 8].map(Duration::from_secs));
        assert_eq!(*waits.last().unwrap(), BACKOFF_MAX);
        assert_eq!(
            next_backoff(BACKOFF_MAX, Duration::from_secs(601)),
            BACKOFF_INITIAL
        );
    }
}
