//! Column definitions per kind: upstream's names, types, priorities and descriptions.

use super::{Col, col, wide};

pub(super) const S: &str = "string";
pub(super) const I: &str = "integer";
pub(super) const B: &str = "boolean";
pub(super) const NAME: Col = Col { name: "Name", ty: S, format: "name", desc: D_NAME, priority: 0 };
pub(super) const AGE: Col = col("Age", S, D_AGE);
pub(super) const CONTAINERS: Col = wide("Containers", S, "Names of each container in the template.");
pub(super) const IMAGES: Col = wide("Images", S, "Images referenced by each container in the template.");
pub(super) const READY_PODS: &str = "Number of the pod with ready state";

pub(super) const DEFAULT: &[Col] = &[NAME, col("Created At", "date", D_AGE)];
pub(super) const POD: &[Col] = &[
    NAME,
    col("Ready", S, "The aggregate readiness state of this pod for accepting traffic."),
    col("Status", S, "The aggregate status of the containers in this pod."),
    col("Restarts", S, "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
    AGE,
    wide("IP", S, D_POD_IP),
    wide("Node", S, D_POD_NODE),
    wide("Nominated Node", S, D_POD_NOMINATED),
    wide("Readiness Gates", S, D_POD_GATES),
];
pub(super) const POD_TEMPLATE: &[Col] = &[
    NAME,
    col("Containers", S, "Names of each container in the template."),
    col("Images", S, "Images referenced by each container in the template."),
    col("Pod Labels", S, "The labels for the pod template."),
];
pub(super) const PDB: &[Col] = &[
    NAME,
    col("Min Available", S, "The minimum number of pods that must be available."),
    col("Max Unavailable", S, "The maximum number of pods that may be unavailable."),
    col("Allowed Disruptions", I, "Calculated number of pods that may be disrupted at this time."),
    AGE,
];
pub(super) const RC: &[Col] = &[
    NAME, col("Desired", I, D_RC_DESIRED), col("Current", I, D_RC_CURRENT), col("Ready", I, D_RC_READY),
    AGE, CONTAINERS, IMAGES, wide("Selector", S, D_RC_SELECTOR),
];
pub(super) const RS: &[Col] = &[
    NAME, col("Desired", I, D_RS_DESIRED), col("Current", I, D_RS_CURRENT), col("Ready", I, D_RS_READY),
    AGE, CONTAINERS, IMAGES, wide("Selector", S, D_RS_SELECTOR),
];
pub(super) const DS: &[Col] = &[
    NAME, col("Desired", I, D_DS_DESIRED), col("Current", I, D_DS_CURRENT), col("Ready", I, D_DS_READY),
    col("Up-to-date", I, D_DS_UPDATED), col("Available", I, D_DS_AVAILABLE),
    col("Node Selector", S, D_NODE_SELECTOR), AGE, CONTAINERS, IMAGES, wide("Selector", S, D_DS_SELECTOR),
];
pub(super) const JOB: &[Col] = &[
    NAME, col("Completions", S, D_JOB_SUCCEEDED), col("Duration", S, "Time required to complete the job."),
    AGE, CONTAINERS, IMAGES, wide("Selector", S, D_JOB_SELECTOR),
];
pub(super) const CRONJOB: &[Col] = &[
    NAME, col("Schedule", S, D_CJ_SCHEDULE), col("Suspend", B, D_CJ_SUSPEND), col("Active", I, D_CJ_ACTIVE),
    col("Last Schedule", S, D_CJ_LAST), AGE, CONTAINERS, IMAGES, wide("Selector", S, D_JOB_SELECTOR),
];
pub(super) const SERVICE: &[Col] = &[
    NAME, col("Type", S, D_SVC_TYPE), col("Cluster-IP", S, D_SVC_CLUSTER_IP),
    col("External-IP", S, D_SVC_EXTERNAL_IPS), col("Port(s)", S, D_SVC_PORTS), AGE,
    wide("Selector", S, D_SVC_SELECTOR),
];
pub(super) const INGRESS: &[Col] = &[
    NAME,
    col("Class", S, "The name of the IngressClass resource that should be used for additional configuration"),
    col("Hosts", S, "Hosts that incoming requests are matched against before the ingress rule"),
    col("Address", S, "Address is a list containing ingress points for the load-balancer"),
    col("Ports", S, "Ports of TLS configurations that open"),
    AGE,
];
pub(super) const INGRESS_CLASS: &[Col] = &[
    NAME,
    col("Controller", S, "Controller that is responsible for handling this class"),
    col("Parameters", S, "A reference to a resource with additional parameters"),
    AGE,
];
pub(super) const STATEFULSET: &[Col] = &[NAME, col("Ready", S, READY_PODS), AGE, CONTAINERS, IMAGES];
pub(super) const ENDPOINTS: &[Col] = &[NAME, col("Endpoints", S, D_EP_SUBSETS), AGE];
pub(super) const NODE: &[Col] = &[
    NAME, col("Status", S, "The status of the node"), col("Roles", S, "The roles of the node"), AGE,
    col("Version", S, D_NODE_KUBELET), wide("Internal-IP", S, D_NODE_ADDRESSES),
    wide("External-IP", S, D_NODE_ADDRESSES), wide("OS-Image", S, D_NODE_OS),
    wide("Kernel-Version", S, D_NODE_KERNEL), wide("Container-Runtime", S, D_NODE_RUNTIME),
];
pub(super) const EVENT: &[Col] = &[
    col("Last Seen", S, D_EV_LAST), col("Type", S, D_EV_TYPE), col("Reason", S, D_EV_REASON),
    col("Object", S, D_EV_OBJECT), wide("Subobject", S, D_EV_FIELD_PATH), wide("Source", S, D_EV_SOURCE),
    col("Message", S, D_EV_MESSAGE), wide("First Seen", S, D_EV_FIRST), wide("Count", S, D_EV_COUNT),
    Col { name: "Name", ty: S, format: "name", desc: D_NAME, priority: 1 },
];
pub(super) const NAMESPACE: &[Col] = &[NAME, col("Status", S, "The status of the namespace"), AGE];
pub(super) const SECRET: &[Col] = &[NAME, col("Type", S, D_SECRET_TYPE), col("Data", S, D_SECRET_DATA), AGE];
pub(super) const SERVICE_ACCOUNT: &[Col] = &[NAME, col("Secrets", S, D_SA_SECRETS), AGE];
pub(super) const PV: &[Col] = &[
    NAME, col("Capacity", S, D_PV_CAPACITY), col("Access Modes", S, D_PV_ACCESS),
    col("Reclaim Policy", S, D_PV_RECLAIM), col("Status", S, D_PV_PHASE), col("Claim", S, D_PV_CLAIM),
    col("StorageClass", S, "StorageClass of the pv"),
    col("VolumeAttributesClass", S, "VolumeAttributesClass of the pv"), col("Reason", S, D_PV_REASON),
    AGE, wide("VolumeMode", S, D_PV_MODE),
];
pub(super) const PVC: &[Col] = &[
    NAME, col("Status", S, D_PVC_PHASE), col("Volume", S, D_PVC_VOLUME), col("Capacity", S, D_PVC_CAPACITY),
    col("Access Modes", S, D_PVC_ACCESS), col("StorageClass", S, "StorageClass of the pvc"),
    col("VolumeAttributesClass", S, "VolumeAttributesClass of the pvc"), AGE,
    wide("VolumeMode", S, D_PVC_MODE),
];
pub(super) const DEPLOYMENT: &[Col] = &[
    NAME, col("Ready", S, READY_PODS), col("Up-to-date", S, D_DEP_UPDATED),
    col("Available", S, D_DEP_AVAILABLE), AGE, CONTAINERS, IMAGES, wide("Selector", S, D_DEP_SELECTOR),
];
pub(super) const HPA: &[Col] = &[
    NAME, col("Reference", S, D_HPA_REF), col("Targets", S, D_HPA_METRICS), col("MinPods", S, D_HPA_MIN),
    col("MaxPods", S, D_HPA_MAX), col("Replicas", S, D_HPA_CURRENT), AGE,
];
pub(super) const CONFIGMAP: &[Col] = &[NAME, col("Data", S, D_CM_DATA), AGE];
pub(super) const NETWORK_POLICY: &[Col] = &[NAME, col("Pod-Selector", S, D_NP_SELECTOR), AGE];
pub(super) const ROLE_BINDING: &[Col] = &[
    NAME, col("Role", S, D_RB_ROLE), AGE, wide("Users", S, "Users in the roleBinding"),
    wide("Groups", S, "Groups in the roleBinding"), wide("ServiceAccounts", S, "ServiceAccounts in the roleBinding"),
];
pub(super) const CLUSTER_ROLE_BINDING: &[Col] = &[
    NAME, col("Role", S, D_CRB_ROLE), AGE, wide("Users", S, "Users in the clusterRoleBinding"),
    wide("Groups", S, "Groups in the clusterRoleBinding"),
    wide("ServiceAccounts", S, "ServiceAccounts in the clusterRoleBinding"),
];
pub(super) const CSR: &[Col] = &[
    NAME, AGE, col("SignerName", S, D_CSR_SIGNER), col("Requestor", S, D_CSR_REQUEST),
    col("RequestedDuration", S, D_CSR_EXPIRATION), col("Condition", S, D_CSR_CONDITIONS),
];
pub(super) const LEASE: &[Col] = &[NAME, col("Holder", S, D_LEASE_HOLDER), AGE];
pub(super) const STORAGE_CLASS: &[Col] = &[
    NAME, col("Provisioner", S, D_SC_PROVISIONER), col("ReclaimPolicy", S, D_SC_RECLAIM),
    col("VolumeBindingMode", S, D_SC_BINDING), col("AllowVolumeExpansion", S, D_SC_EXPANSION), AGE,
];
pub(super) const CONTROLLER_REVISION: &[Col] = &[
    NAME, col("Controller", S, "Controller of the object"), col("Revision", S, D_CR_REVISION), AGE,
];
pub(super) const RESOURCE_QUOTA: &[Col] = &[
    NAME, AGE,
    col("Request", S, "Request represents a minimum amount of cpu/memory that a container may consume."),
    col("Limit", S, "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."),
];
pub(super) const PRIORITY_CLASS: &[Col] = &[NAME, col("Value", I, D_PC_VALUE), col("Global-Default", B, D_PC_DEFAULT), AGE];
    // Upstream describes this column with ObjectMeta's (absent) "handler" doc: an empty string.
pub(super) const RUNTIME_CLASS: &[Col] = &[NAME, col("Handler", S, ""), AGE];
pub(super) const WEBHOOKS: &[Col] = &[
    NAME, col("Webhooks", I, "Webhooks indicates the number of webhooks registered in this configuration"), AGE,
];
pub(super) const ADMISSION_POLICY: &[Col] = &[
    NAME, col("Validations", I, "Validations indicates the number of validation rules defined in this configuration"),
    col("ParamKind", S, "ParamKind specifies the kind of resources used to parameterize this policy"), AGE,
];
pub(super) const ADMISSION_POLICY_BINDING: &[Col] = &[
    NAME, col("PolicyName", S, "PolicyName indicates the policy definition which the policy binding binded to"),
    col("ParamRef", S, "ParamRef indicates the param resource which sets the configration param"), AGE,
];
pub(super) const ENDPOINT_SLICE: &[Col] = &[
    NAME, col("AddressType", S, D_ES_ADDRESS_TYPE), col("Ports", S, D_ES_PORTS),
    col("Endpoints", S, D_ES_ENDPOINTS), AGE,
];

// ---------------------------------------------------------------------------------------------
// Column descriptions: the API field documentation kube-apiserver v1.29 serves (k8s.io/api v0.29).

const D_NAME: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
pub(super) const D_AGE: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const D_POD_IP: &str = "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.";
const D_POD_NODE: &str = "NodeName is a request to schedule this pod onto a specific node. If it is non-empty, the scheduler simply schedules this pod onto that node, assuming that it fits resource requirements.";
const D_POD_NOMINATED: &str = "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.";
const D_POD_GATES: &str = "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates";
const D_RC_DESIRED: &str = "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller";
const D_RC_CURRENT: &str = "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller";
const D_RC_READY: &str = "The number of ready replicas for this replication controller.";
const D_RC_SELECTOR: &str = "Selector is a label query over pods that should match the Replicas count. If Selector is empty, it is defaulted to the labels present on the Pod template. Label keys and values that must match in order to be controlled by this replication controller, if empty defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
const D_RS_DESIRED: &str = "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller";
const D_RS_CURRENT: &str = "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller";
const D_RS_READY: &str = "The number of ready replicas for this replica set.";
const D_RS_SELECTOR: &str = "Selector is a label query over pods that should match the replica count. If the selector is empty, it is defaulted to the labels present on the pod template. Label keys and values that must match in order to be controlled by this replica set. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
const D_DS_DESIRED: &str = "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/";
const D_DS_CURRENT: &str = "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/";
const D_DS_READY: &str = "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.";
const D_DS_UPDATED: &str = "The total number of nodes that are running updated daemon pod";
const D_DS_AVAILABLE: &str = "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)";
const D_NODE_SELECTOR: &str = "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/";
const D_DS_SELECTOR: &str = "A label query over pods that are managed by the daemon set. Must match in order to be controlled. If empty, defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
const D_JOB_SUCCEEDED: &str = "The number of pods which reached phase Succeeded.";
const D_JOB_SELECTOR: &str = "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
const D_CJ_SCHEDULE: &str = "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.";
const D_CJ_SUSPEND: &str = "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.";
const D_CJ_ACTIVE: &str = "A list of pointers to currently running jobs.";
const D_CJ_LAST: &str = "Information when was the last time the job was successfully scheduled.";
const D_SVC_TYPE: &str = "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types";
const D_SVC_CLUSTER_IP: &str = "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies";
const D_SVC_EXTERNAL_IPS: &str = "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system.";
const D_SVC_PORTS: &str = "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies";
const D_SVC_SELECTOR: &str = "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/";
const D_EP_SUBSETS: &str = "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service.";
const D_NODE_KUBELET: &str = "Kubelet Version reported by the node.";
const D_NODE_ADDRESSES: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/concepts/nodes/node/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";
const D_NODE_OS: &str =
    "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).";
const D_NODE_KERNEL: &str =
    "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).";
const D_NODE_RUNTIME: &str = "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).";
const D_EV_LAST: &str = "The time at which the most recent occurrence of this event was recorded.";
const D_EV_TYPE: &str =
    "Type of this event (Normal, Warning), new types could be added in the future";
const D_EV_REASON: &str = "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.";
const D_EV_OBJECT: &str = "The object that this event is about.";
const D_EV_FIELD_PATH: &str = "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.";
const D_EV_SOURCE: &str =
    "The component reporting this event. Should be a short machine understandable string.";
const D_EV_MESSAGE: &str = "A human-readable description of the status of this operation.";
const D_EV_FIRST: &str =
    "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)";
const D_EV_COUNT: &str = "The number of times this event has occurred.";
const D_SECRET_TYPE: &str = "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types";
const D_SECRET_DATA: &str = "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4";
const D_SA_SECRETS: &str = "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret";
const D_PV_CAPACITY: &str = "capacity is the description of the persistent volume's resources and capacity. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity";
const D_PV_ACCESS: &str = "accessModes contains all ways the volume can be mounted. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes";
const D_PV_RECLAIM: &str = "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim. Valid options are Retain (default for manually created PersistentVolumes), Delete (default for dynamically provisioned PersistentVolumes), and Recycle (deprecated). Recycle must be supported by the volume plugin underlying this PersistentVolume. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming";
const D_PV_PHASE: &str = "phase indicates if a volume is available, bound to a claim, or released by a claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase";
const D_PV_CLAIM: &str = "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim. Expected to be non-nil when bound. claim.VolumeName is the authoritative bind between PV and PVC. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding";
const D_PV_REASON: &str = "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.";
const D_PV_MODE: &str = "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state. Value of Filesystem is implied when not included in spec.";
const D_PVC_PHASE: &str = "phase represents the current phase of PersistentVolumeClaim.";
const D_PVC_VOLUME: &str =
    "volumeName is the binding reference to the PersistentVolume backing this claim.";
const D_PVC_CAPACITY: &str = "capacity represents the actual resources of the underlying volume.";
const D_PVC_ACCESS: &str = "accessModes contains the actual access modes the volume backing the PVC has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1";
const D_PVC_MODE: &str = "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec.";
pub(super) const D_DEP_UPDATED: &str = "Total number of non-terminated pods targeted by this deployment that have the desired template spec.";
const D_DEP_AVAILABLE: &str = "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.";
const D_DEP_SELECTOR: &str = "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.";
const D_HPA_REF: &str = "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count.";
const D_HPA_METRICS: &str = "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond.";
const D_HPA_MIN: &str = "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available.";
const D_HPA_MAX: &str = "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas.";
const D_HPA_CURRENT: &str = "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.";
const D_CM_DATA: &str = "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.";
const D_RB_ROLE: &str = "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.";
const D_CRB_ROLE: &str = "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.";
const D_CSR_SIGNER: &str = "Requested signer for the request. It is a qualified name in the form: `scope-hostname.io/name`. If empty, it will be defaulted:\n 1. If it's a kubelet client certificate, it is assigned\n    \"kubernetes.io/kube-apiserver-client-kubelet\".\n 2. If it's a kubelet serving certificate, it is assigned\n    \"kubernetes.io/kubelet-serving\".\n 3. Otherwise, it is assigned \"kubernetes.io/legacy-unknown\".\nDistribution of trust for signers happens out of band. You can select on this field using `spec.signerName`.";
const D_CSR_REQUEST: &str = "Base64-encoded PKCS#10 CSR data";
const D_CSR_EXPIRATION: &str = "expirationSeconds is the requested duration of validity of the issued certificate. The certificate signer may issue a certificate with a different validity duration so a client must check the delta between the notBefore and and notAfter fields in the issued certificate to determine the actual duration.\n\nThe v1.22+ in-tree implementations of the well-known Kubernetes signers will honor this field as long as the requested duration is not greater than the maximum duration they will honor per the --cluster-signing-duration CLI flag to the Kubernetes controller manager.\n\nCertificate signers may not honor this field for various reasons:\n\n  1. Old signer that is unaware of the field (such as the in-tree\n     implementations prior to v1.22)\n  2. Signer whose configured maximum is shorter than the requested duration\n  3. Signer whose configured minimum is longer than the requested duration\n\nThe minimum valid value for expirationSeconds is 600, i.e. 10 minutes.";
const D_CSR_CONDITIONS: &str = "Conditions applied to the request, such as approval or denial.";
const D_LEASE_HOLDER: &str =
    "holderIdentity contains the identity of the holder of a current lease.";
const D_SC_PROVISIONER: &str = "provisioner indicates the type of the provisioner.";
const D_SC_RECLAIM: &str = "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete.";
const D_SC_BINDING: &str = "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature.";
const D_SC_EXPANSION: &str =
    "allowVolumeExpansion shows whether the storage class allow volume expand.";
const D_CR_REVISION: &str = "revision indicates the revision of the state represented by Data.";
const D_PC_VALUE: &str = "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec.";
const D_PC_DEFAULT: &str = "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority.";
const D_ES_ADDRESS_TYPE: &str = "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name.";
const D_ES_PORTS: &str = "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. When ports is empty, it indicates that there are no defined ports. When a port is defined with a nil port value, it indicates \"all ports\". Each slice may include a maximum of 100 ports.";
const D_ES_ENDPOINTS: &str = "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.";
const D_NP_SELECTOR: &str = "Selects the pods to which this NetworkPolicy object applies.  The array of ingress rules is applied to any pods selected by this field. Multiple network policies can select the same set of pods.  In this case, the ingress rules for each are combined additively. This field is NOT optional and follows standard label selector semantics. An empty podSelector matches all pods in this namespace.";
