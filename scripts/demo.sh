#!/usr/bin/env bash
# Set up and run Airlock: a real local control plane (etcd, kube-apiserver,
# kube-scheduler, kube-controller-manager) with fake GPU nodes run by KWOK, Airlock's
# webhook and controller wired in, and the example workloads applied; then a table of
# what happened to each pod.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/airlock sandbox up --demo "$@"
echo
echo "Explore:  export KUBECONFIG=\$(.venv/bin/airlock sandbox status | sed -n 's/^kubeconfig: //p')"
echo "          kubectl get events -n research; kubectl get pods -A -o wide"
echo "Stop:     .venv/bin/airlock sandbox down"
