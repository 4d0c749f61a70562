//! The gRPC service `rkcm.informer.v1.Informer`: List, Get and Watch read the caches;
//! ListResources reads discovery; Stats reads the counters. Bad requests are answered
//! with INVALID_ARGUMENT (a selector that does not parse, with the parse error) or
//! NOT_FOUND (a resource the API server does not serve, named).

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use prost::Message;
use rkcm_proto::server::informer_server::Informer;
use rkcm_proto::v1::{
    self, GetRequest, GetResponse, GroupVersionResource, ListRequest, ListResourcesRequest,
    ListResourcesResponse, ListResponse, Projection, ResourceStats, StatsRequest, StatsResponse,
    SubscriberStats, WatchRequest,
};
use rkcm_proto::SharedWatchEvent;
use tonic::{Request, Response, Status};
use tracing::{debug, info};

use crate::cache::ResourceCache;
use crate::informers::{Informers, LookupError};
use crate::projection::{FieldPaths, ProjectionError};
use crate::readable;
use crate::selector::Filter;
use crate::subscriber_queue::SubscriberQueue;

pub struct InformerService {
    pub informers: Arc<Informers>,
    pub bookmark_interval: Duration,
}

fn lookup_status(error: LookupError) -> Status {
    match error {
        LookupError::NotFound(_) | LookupError::NotWatchable(..) => {
            Status::not_found(error.to_string())
        }
        LookupError::Invalid(_) => Status::invalid_argument(error.to_string()),
        LookupError::Unavailable(_) => Status::unavailable(error.to_string()),
    }
}

/// The field paths of a request, refused with METADATA.
fn field_paths(fields: &[String], projection: Projection) -> Result<Option<FieldPaths>, Status> {
    let paths = FieldPaths::parse(fields).map_err(|e| Status::invalid_argument(e.to_string()))?;
    if paths.is_some() && projection == Projection::Metadata {
        return Err(Status::invalid_argument(
            ProjectionError::WithMetadata.to_string(),
        ));
    }
    Ok(paths)
}

fn resource_of(resource: Option<&GroupVersionResource>) -> Result<&GroupVersionResource, Status> {
    resource.ok_or_else(|| {
        Status::invalid_argument("resource is required: {\"version\":\"v1\",\"resource\":\"pods\"}")
    })
}

impl InformerService {
    async fn synced_cache(&self, gvr: &GroupVersionResource) -> Result<Arc<ResourceCache>, Status> {
        let cache = self
            .informers
            .start(gvr, false)
            .await
            .map_err(lookup_status)?;
        cache.wait_synced().await;
        Ok(cache)
    }
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<SharedWatchEvent, Status>> + Send>>;

/// Unsubscribes when the stream is dropped: the client went away, and its queue goes with it.
struct Subscription {
    cache: Arc<ResourceCache>,
    informers: Arc<Informers>,
    queue: Arc<SubscriberQueue>,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        debug!(resource = %self.cache.info.gvr.path(), subscriber = %self.queue.subscriber, "subscriber left");
        self.cache.unsubscribe(self.id);
        self.informers.touch(&self.cache.info.gvr);
    }
}

#[tonic::async_trait]
impl Informer for InformerService {
    async fn list_resources(
        &self,
        _request: Request<ListResourcesRequest>,
    ) -> Result<Response<ListResourcesResponse>, Status> {
        let resources = self
            .informers
            .resources(true)
            .await
            .map_err(lookup_status)?;
        Ok(Response::new(ListResourcesResponse {
            resources: resources
                .iter()
                .map(|r| v1::ResourceInfo {
                    group: r.gvr.group.clone(),
                    version: r.gvr.version.clone(),
                    resource: r.gvr.resource.clone(),
                    kind: r.kind.clone(),
                    namespaced: r.namespaced,
                    verbs: r.verbs.clone(),
                })
                .collect(),
        }))
    }

    async fn list(&self, request: Request<ListRequest>) -> Result<Response<ListResponse>, Status> {
        let request = request.into_inner();
        let gvr = resource_of(request.resource.as_ref())?;
        let filter = Filter::new(
            &gvr.group,
            &gvr.resource,
            &request.namespace,
            &request.label_selector,
            &request.field_selector,
            None,
        )
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let paths = field_paths(&request.fields, request.projection())?;
        let cache = self.synced_cache(gvr).await?;
        let limit = usize::try_from(request.limit.max(0)).unwrap_or(usize::MAX);
        let after = (!request.r#continue.is_empty()).then_some(request.r#continue.as_str());
        let page = cache.list(&filter, limit, after);
        let metadata_only = request.projection() == Projection::Metadata;
        let texts = page.items.iter().map(|o| match &paths {
            Some(paths) => o.projected_json(paths),
            None if metadata_only => o.metadata_json(),
            None => o.json(),
        });
        let (items, readable_items) = if request.readable {
            let rendered = texts.filter_map(|json| readable::object_struct(&json));
            (Vec::new(), rendered.collect())
        } else {
            let text = texts.map(|json| String::from_utf8_lossy(&json).into_owned());
            (text.collect(), Vec::new())
        };
        Ok(Response::new(ListResponse {
            resource_version: page.resource_version,
            r#continue: page
                .continue_after
                .map(|k| k.to_string())
                .unwrap_or_default(),
            items,
            readable_items,
        }))
    }

    async fn get(&self, request: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        let request = request.into_inner();
        let gvr = resource_of(request.resource.as_ref())?;
        if request.name.is_empty() {
            return Err(Status::invalid_argument("name is required"));
        }
        let paths = field_paths(&request.fields, request.projection())?;
        let cache = self.synced_cache(gvr).await?;
        let (object, resource_version) = cache.get(&request.namespace, &request.name);
        let object = object.ok_or_else(|| {
            Status::not_found(format!(
                "{} {:?} not found in the cache{}",
                gvr.resource,
                request.name,
                if request.namespace.is_empty() {
                    String::new()
                } else {
                    format!(" of namespace {:?}", request.namespace)
                }
            ))
        })?;
        let json = match &paths {
            Some(paths) => object.projected_json(paths),
            None if request.projection() == Projection::Metadata => object.metadata_json(),
            None => object.json(),
        };
        let (object, readable_object) = if request.readable {
            (String::new(), readable::object_struct(&json))
        } else {
            (String::from_utf8_lossy(&json).into_owned(), None)
        };
        Ok(Response::new(GetResponse {
            resource_version,
            object,
            readable_object,
        }))
    }

    type WatchStream = WatchStream;

    async fn watch(&self, request: Request<WatchRequest>) -> Result<Response<WatchStream>, Status> {
        let peer = request
            .remote_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|| "unix".to_string());
        let request = request.into_inner();
        let gvr = resource_of(request.resource.as_ref())?;
        let shard = request.shard.as_ref().map(|s| (s.index, s.count));
        let filter = Filter::new(
            &gvr.group,
            &gvr.resource,
            &request.namespace,
            &request.label_selector,
            &request.field_selector,
            shard,
        )
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let paths = field_paths(&request.fields, request.projection())?;
        let cache = self
            .informers
            .start(gvr, false)
            .await
            .map_err(lookup_status)?;
        let subscriber = if request.subscriber.is_empty() {
            format!("anonymous@{peer}")
        } else {
            request.subscriber.clone()
        };
        let metadata_only = request.projection() == Projection::Metadata;
        let mut queue = SubscriberQueue::new(
            subscriber.clone(),
            filter,
            metadata_only,
            self.bookmark_interval,
            cache.empty_body.clone(),
        );
        if let Some(paths) = paths {
            queue = queue.with_projection(cache.projection(paths));
        }
        let queue = Arc::new(queue);
        let resume = (!request.resume_from_resource_version.is_empty())
            .then(|| request.resume_from_resource_version.clone());
        info!(resource = %cache.info.gvr.path(), %subscriber, resume_from = resume.as_deref().unwrap_or(""), "subscriber joined");
        let id = cache.subscribe(queue.clone(), resume);
        let render = request.readable;
        let subscription = Subscription {
            cache,
            informers: self.informers.clone(),
            queue,
            id,
        };
        let stream = futures::stream::unfold(subscription, move |subscription| async move {
            let mut event = subscription.queue.next().await?;
            if render {
                event = readable::readable_event(event);
            }
            let bytes = event.encoded_len() as u64;
            subscription
                .queue
                .counters
                .bytes_sent
                .fetch_add(bytes, Ordering::Relaxed);
            Some((Ok(event), subscription))
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn stats(
        &self,
        _request: Request<StatsRequest>,
    ) -> Result<Response<StatsResponse>, Status> {
        let mut response = StatsResponse::default();
        for running in self.informers.running() {
            let cache = &running.cache;
            let subscribers = cache.subscribers();
            let totals = cache.delivery_totals();
            let c = &cache.counters;
            response.resources.push(ResourceStats {
                resource: Some((*cache.gvr).clone()),
                objects: cache.len() as u64,
                subscribers: subscribers.len() as u32,
                events_received: c.events_received.load(Ordering::Relaxed),
                events_delivered: totals.delivered,
                events_coalesced: totals.coalesced,
                relists: c.relists.load(Ordering::Relaxed),
                resource_version: cache.resource_version(),
                synced: cache.is_synced(),
            });
            for queue in subscribers {
                response.subscribers.push(SubscriberStats {
                    subscriber: queue.subscriber.clone(),
                    resource: Some((*cache.gvr).clone()),
                    queue_depth: queue.depth() as u64,
                    events_delivered: queue.counters.delivered.load(Ordering::Relaxed),
                    events_coalesced: queue.counters.coalesced.load(Ordering::Relaxed),
                });
            }
        }
        Ok(Response::new(response))
    }
}
