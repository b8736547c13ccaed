//! Where prefixes come from: Kubernetes watchers and the standalone file source.
