#!/usr/bin/env bash
# Install Airlock on a cluster without cert-manager (deploy/overlays/no-cert-manager).
#
#   scripts/install-no-cert-manager.sh [--render] [CERT_DIR]
#
# 1. Makes a CA and a serving certificate for the Service's DNS names with
#    `airlock certs`, in CERT_DIR (default ./airlock-certs). An existing pair there is
#    reused, so running the script again is an upgrade, not a rotation. Keep CERT_DIR
#    private: it holds the CA's key.
# 2. Builds, in a temporary kustomization over the overlay, the Secret
#    airlock-webhook-tls (tls.crt, tls.key, ca.crt) and a patch that puts the CA into
#    both webhook configurations' caBundle.
# 3. Applies that with `kubectl apply --server-side` (or prints it, with --render).
#
# Rotation: ROTATE=1 makes a new CA and certificate. The caBundle then carries the new
# and the previous CA together, so the apiserver trusts whichever pair a webhook
# replica serves while the kubelet swaps the mounted Secret (up to a minute or two).
# Run the script once more, without ROTATE, a few minutes later to drop the old CA.
#
# Environment: AIRLOCK (the airlock command; default .venv/bin/airlock, else airlock on
# PATH), KUBECTL (default kubectl), ROTATE=1, DAYS is not supported: `airlock certs`
# issues for 365 days, so rotate within the year (docs/operations.md).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
render=0
if [ "${1:-}" = "--render" ]; then render=1; shift; fi
dir=${1:-./airlock-certs}
kubectl=${KUBECTL:-kubectl}
if [ -n "${AIRLOCK:-}" ]; then airlock=$AIRLOCK
elif [ -x "$repo/.venv/bin/airlock" ]; then airlock=$repo/.venv/bin/airlock
else airlock=airlock; fi

host=airlock-webhook.airlock-system.svc
mkdir -p "$dir"
chmod 700 "$dir"
previous=""
if [ "${ROTATE:-0}" = 1 ] && [ -f "$dir/ca.crt" ]; then
  previous=$(cat "$dir/ca.crt")
  cp "$dir/ca.crt" "$dir/ca.previous.crt"
fi
if [ "${ROTATE:-0}" = 1 ] || [ ! -f "$dir/tls.crt" ] || [ ! -f "$dir/tls.key" ] \
    || [ ! -f "$dir/ca.crt" ]; then
  "$airlock" certs --out "$dir" --host "$host" --host "$host.cluster.local" >&2
elif [ -f "$dir/ca.previous.crt" ] && [ "${ROTATE:-0}" != 1 ]; then
  rm -f "$dir/ca.previous.crt"  # the rotation has settled; trust only the current CA
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$dir/tls.crt" "$dir/tls.key" "$dir/ca.crt" "$work/"
bundle=$({ cat "$dir/ca.crt"; [ -z "$previous" ] || printf '%s\n' "$previous"; } \
  | base64 | tr -d '\n')
# kustomize takes only relative paths to other kustomizations.
overlay=$(python3 -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' \
  "$repo/deploy/overlays/no-cert-manager" "$work")
cat > "$work/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $overlay
secretGenerator:
  - name: airlock-webhook-tls
    namespace: airlock-system
    type: kubernetes.io/tls
    files: [tls.crt, tls.key, ca.crt]
    options:
      disableNameSuffixHash: true
patches:
  - target: {group: admissionregistration.k8s.io, kind: MutatingWebhookConfiguration, name: airlock}
    patch: '[{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": "$bundle"},
             {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": "$bundle"}]'
  - target: {group: admissionregistration.k8s.io, kind: ValidatingWebhookConfiguration, name: airlock}
    patch: '[{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": "$bundle"}]'
YAML
if [ "$render" = 1 ]; then
  "$kubectl" kustomize "$work"
  exit 0
fi
"$kubectl" kustomize "$work" | "$kubectl" apply --server-side --field-manager=airlock-install -f -
echo "installed; certificate files in $dir (rerun with ROTATE=1 to rotate)" >&2
