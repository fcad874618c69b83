#!/usr/bin/env bash
# Starts and stops the Kubernetes control plane the Kubernetes tests run against: a kwokctl
# cluster (binary runtime) of a real kube-apiserver, etcd, kube-controller-manager (garbage
# collection, the `default` service account), kube-scheduler and kwok, which simulates the nodes
# (no kubelet, no container runtime: see docs/kubernetes.md for what is simulated).
#
# Usage:
#   tests/k8s/cluster.sh up   [NAME]   build-or-cache the binaries, start the cluster, wait until it
#                                      serves; prints `export TETHER_KUBECONFIG=… TETHER_KUBECTL=…`
#                                      (eval it)
#   tests/k8s/cluster.sh down [NAME]   stop it and remove its directory; fails if anything is left
#   tests/k8s/cluster.sh env  [NAME]   prints the export line of a running cluster
# NAME defaults to `tether`. Environment (optional):
#   TETHER_KWOK_WORKDIR   where clusters live (default ${TMPDIR:-/tmp}/tether-kwok-$UID)
#   TETHER_TOOLS_CACHE    see tests/k8s/build.sh
#
# Pods labelled app.kubernetes.io/managed-by=tether are left to the tests' stand-in kubelet
# (tests/src/kubelet/): kwok neither starts nor deletes them, the stand-in runs their containers as
# real local processes and routes their logs and port-forwards through kwok's Logs and
# PortForward resources (enabled here as CRDs).
set -euo pipefail

die() { echo "tests/k8s/cluster.sh: error: $*" >&2; exit 1; }
log() { echo "tests/k8s/cluster.sh: $*" >&2; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CMD=${1:-}
NAME=${2:-tether}
[[ $CMD == up || $CMD == down || $CMD == env ]] || { echo "usage: $0 up|down|env [NAME]" >&2; exit 2; }
[[ $NAME =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || die "cluster name '$NAME' is not a DNS label"

export KWOK_WORKDIR=${TETHER_KWOK_WORKDIR:-${TMPDIR:-/tmp}/tether-kwok-$(id -u)}
CLUSTER_DIR=$KWOK_WORKDIR/clusters/$NAME
KUBECONFIG_PATH=$CLUSTER_DIR/kubeconfig.yaml
BIN=$("$HERE/build.sh")
export PATH=$BIN:$PATH # kwokctl runs `kubectl get --raw /version` to see the server up

kwokctl() { "$BIN/kwokctl" --name "$NAME" "$@"; }
export_line() {
	printf 'export TETHER_KUBECONFIG=%q\n' "$KUBECONFIG_PATH"
	printf 'export TETHER_KUBECTL=%q\n' "$BIN/kubectl"
}

# Processes started from this cluster's directory (kwokctl's binary runtime runs each component
# with its configuration under CLUSTER_DIR).
leftovers() {
	local pid cmd
	for pid in /proc/[0-9]*; do
		cmd=$(tr '\0' ' ' 2>/dev/null <"$pid/cmdline") || continue
		[[ $cmd == *"$CLUSTER_DIR/"* ]] && echo "${pid#/proc/} $cmd"
	done
	return 0
}

case $CMD in
env)
	[[ -f $KUBECONFIG_PATH ]] || die "no cluster '$NAME' in $KWOK_WORKDIR (run: $0 up $NAME)"
	export_line
	;;
up)
	if [[ -f $KUBECONFIG_PATH ]]; then
		log "cluster '$NAME' exists in $KWOK_WORKDIR; replacing it"
		kwokctl delete cluster >&2 || true
	fi
	mkdir -p "$KWOK_WORKDIR"
	CONFIG=$KWOK_WORKDIR/$NAME-config.yaml
	cat >"$CONFIG" <<-EOF
		apiVersion: config.kwok.x-k8s.io/v1alpha1
		kind: KwokctlConfiguration
		options:
		  # Every component listens on loopback only (kwokctl's default is 0.0.0.0).
		  bindAddress: 127.0.0.1
		---
		apiVersion: config.kwok.x-k8s.io/v1alpha1
		kind: KwokConfiguration
		options:
		  # kwokctl does not default a KwokConfiguration it is given: kwok's defaults, spelled out
		  # (kwokctl itself passes --manage-all-nodes=true: kwok simulates every node).
		  cidr: 10.0.0.0/24
		  enableDebuggingHandlers: true
		  enableContentionProfiling: false
		  enableProfilingHandler: false
		  podPlayStageParallelism: 4
		  nodePlayStageParallelism: 4
		  nodeLeaseParallelism: 4
		  podsOnNodeSyncParallelism: 1
		  enablePodsOnNodeSyncListPager: true
		  enablePodsOnNodeSyncStreamWatch: false
		  disregardStatusWithLabelSelector: app.kubernetes.io/managed-by=tether
	EOF
	t0=$SECONDS
	kwokctl create cluster --runtime binary --config "$CONFIG" \
		--kube-apiserver-binary "$BIN/kube-apiserver" \
		--etcd-binary "$BIN/etcd" \
		--kwok-controller-binary "$BIN/kwok" \
		--kube-controller-manager-binary "$BIN/kube-controller-manager" \
		--kube-scheduler-binary "$BIN/kube-scheduler" \
		--enable-crds Logs,PortForward \
		--wait 120s >&2 || die "kwokctl could not start cluster '$NAME' (logs: $CLUSTER_DIR/logs)"
	# The controller-manager makes the default service account; Pods are refused until it exists.
	kubectl --kubeconfig "$KUBECONFIG_PATH" wait --for=create serviceaccount/default --timeout=120s >/dev/null ||
		die "cluster '$NAME' has no default service account after 120 s (is kube-controller-manager running? logs: $CLUSTER_DIR/logs)"
	# kwokctl reports a cluster ready when the API server answers, even if a component exited.
	for pidfile in "$CLUSTER_DIR"/pids/*.pid; do
		component=$(basename "$pidfile" .pid)
		[[ -d /proc/$(cat "$pidfile") ]] ||
			die "$component of cluster '$NAME' exited: $(tail -c 600 "$CLUSTER_DIR/logs/$component.log" 2>/dev/null)"
	done
	log "cluster '$NAME' serves $(kubectl --kubeconfig "$KUBECONFIG_PATH" version -o json | sed -n 's/.*"gitVersion": *"\(v[^"]*\)".*/\1/p' | tail -1) after $((SECONDS - t0))s"
	export_line
	;;
down)
	if [[ -d $CLUSTER_DIR ]]; then
		kwokctl delete cluster >&2 || die "kwokctl could not delete cluster '$NAME'"
	fi
	rm -f "$KWOK_WORKDIR/$NAME-config.yaml"
	left=$(leftovers)
	[[ -z $left ]] || die "processes of cluster '$NAME' are still running:"$'\n'"$left"
	[[ ! -e $CLUSTER_DIR ]] || die "$CLUSTER_DIR is still there"
	log "cluster '$NAME' stopped; nothing left"
	;;
esac
