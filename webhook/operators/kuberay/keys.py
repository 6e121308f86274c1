"""The keys of KubeRay (github.com/ray-project/kuberay/ray-operator v1.4.2,
controllers/ray/utils/constant.go) on the pods and objects it makes."""

GROUP = "ray.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"

CLUSTER_LABEL = "ray.io/cluster"
NODE_TYPE = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
IS_RAY_NODE = "ray.io/is-ray-node"
IDENTIFIER = "ray.io/identifier"
FT_ENABLED = "ray.io/ft-enabled"
ORIGIN_NAME = "ray.io/originated-from-cr-name"
ORIGIN_CRD = "ray.io/originated-from-crd"
APP_NAME = "app.kubernetes.io/name"
CREATED_BY = "app.kubernetes.io/created-by"
