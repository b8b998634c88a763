// Package automanaged is the cluster provider for static peers
// (protoactor-go's automanaged provider): every member serves a small HTTP
// health endpoint and polls those of the others. Suited to tests and small
// fixed deployments. Set a Provider as runtime/cluster.Config.Provider; only
// programs that import this package compile its HTTP server (echo).
package automanaged
