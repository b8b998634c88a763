// Package kubernetes finds the members of a Scribe cluster
// (runtime/cluster.Config) among the pods of a Kubernetes namespace, through
// the Kubernetes API (k8s.io/client-go). Use Provider as
// cluster.Config.Provider.
//
// # How it works
//
// When its cluster starts, a member merge-patches its own pod: the labels
// LabelCluster (the cluster's name), LabelMemberID (the ID of the member's
// actor system, the key protoactor-go's gossip and member list use) and
// LabelPort, and the annotations AnnotationAddress (cluster.Config's
// Host:Port) and AnnotationKinds. The pod's other labels are kept. Then it
// lists and watches the namespace's pods carrying its cluster's label, and
// hands the members among them to the cluster's member list on every
// change; it lists and watches again whenever a watch ends, after a pause
// that grows with consecutive failures (Provider.RetryInterval). A pod is
// a member while it is Running, is not being deleted, and carries the
// labels and the address. Shutdown stops the watch and removes the
// member's labels and annotations from its pod (within 5 s).
//
// Readiness is deliberately not required: a readiness probe usually waits
// for runtime.New to return, and runtime.New waits for the member to see
// itself in the topology, so requiring readiness would deadlock every
// start. Make the pod ready once runtime.New has returned (see Example).
//
// A pod being deleted (a rolling update, a scale-down) leaves the topology
// as soon as its deletion starts, on every member including itself: the
// others take over its streams once it has released their leases or its
// node session expired; the member itself answers runtime.ErrLeaseLost
// (Ready too) while it tries to rejoin, which it cannot while its pod is
// being deleted or not Running. It should finish with Runtime.Shutdown,
// which it is being told to do by SIGTERM anyway. A member whose process died while its pod stays
// Running (its container restarting) stays in the topology until the new
// process registers with a new member ID, or the pod stops Running; keep
// container restarts fast.
//
// Unlike protoactor-go's own Kubernetes provider, this one takes the pod
// name and namespace from the configuration or the downward API, registers
// the member under its actor system's ID, and uses no actor futures.
//
// # Why a separate package
//
// Packages runtime and runtime/cluster do not import client-go, which is
// large; only programs that import this package compile it.
// cluster.Provider is the seam.
//
// # Deployment
//
// The member needs, in its namespace, a Role allowing get, list, watch and
// patch on pods, bound to the pod's service account. It needs to know its
// pod: set the environment variables POD_NAME and POD_NAMESPACE with the
// downward API (else the host name and the service account's namespace are
// used), and POD_IP, because cluster.Config.Host must be the pod's IP: the
// other members connect to the address the member announces, and the
// default 127.0.0.1 would point them at themselves. Each member's
// cluster.Config.Port must be open between the pods (mind NetworkPolicies).
//
// With a StatefulSet, each pod keeps its name across restarts, so with the
// default runtime.Config.NodeID (the host name, the pod's name) a restarted
// member takes its streams back at once instead of waiting for its old node
// session to expire. A Deployment works too.
//
// A minimal setup (the program reads POD_IP into cluster.Config.Host, e.g.
// with args: ["-cluster-host=$(POD_IP)"], or os.Getenv("POD_IP")):
//
//	apiVersion: v1
//	kind: ServiceAccount
//	metadata: {name: orders}
//	---
//	apiVersion: rbac.authorization.k8s.io/v1
//	kind: Role
//	metadata: {name: scribe-members}
//	rules:
//	- apiGroups: [""]
//	  resources: [pods]
//	  verbs: [get, list, watch, patch]
//	---
//	apiVersion: rbac.authorization.k8s.io/v1
//	kind: RoleBinding
//	metadata: {name: orders-scribe-members}
//	subjects:
//	- {kind: ServiceAccount, name: orders}
//	roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: scribe-members}
//	---
//	apiVersion: apps/v1
//	kind: StatefulSet
//	metadata: {name: orders}
//	spec:
//	  serviceName: orders
//	  replicas: 3
//	  podManagementPolicy: Parallel
//	  selector: {matchLabels: {app: orders}}
//	  template:
//	    metadata: {labels: {app: orders}}
//	    spec:
//	      serviceAccountName: orders
//	      containers:
//	      - name: orders
//	        image: registry.example.com/orders:1.0
//	        args: ["-cluster-host=$(POD_IP)", "-cluster-port=7000"]
//	        ports:
//	        - {name: cluster, containerPort: 7000}
//	        - {name: http, containerPort: 8080}
//	        env:
//	        - name: POD_NAME
//	          valueFrom: {fieldRef: {fieldPath: metadata.name}}
//	        - name: POD_NAMESPACE
//	          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
//	        - name: POD_IP
//	          valueFrom: {fieldRef: {fieldPath: status.podIP}}
//	        readinessProbe:
//	          httpGet: {path: /readyz, port: http}
//
// List a cluster's members with
//
//	kubectl get pods -l scribe.dev/cluster=orders -L scribe.dev/member-id
//
// Outside the cluster (development), set Provider.KubeConfig to a
// kubeconfig file, or Provider.Client.
package kubernetes
