"""The keys of the Kubeflow training-operator (github.com/kubeflow/training-operator v1.9.2,
pkg/apis/kubeflow.org/v1/common_types.go), on the pods of all its kinds and of the
mpi-operator's MPIJob, and the kinds its pods' owners are."""

GROUP = "kubeflow.org"
# The plural of each kind its pods' ownerReferences name. The version comes from the
# reference itself: MPIJob is kubeflow.org/v1 from the training-operator and v2beta1 from
# the mpi-operator, and the pods of both carry the same labels.
PLURALS = {
    "PyTorchJob": "pytorchjobs",
    "TFJob": "tfjobs",
    "XGBoostJob": "xgboostjobs",
    "PaddleJob": "paddlejobs",
    "JAXJob": "jaxjobs",
    "MPIJob": "mpijobs",
}

JOB_NAME_LABEL = "training.kubeflow.org/job-name"
OPERATOR_NAME = "training.kubeflow.org/operator-name"
REPLICA_TYPE = "training.kubeflow.org/replica-type"
REPLICA_INDEX = "training.kubeflow.org/replica-index"
JOB_ROLE = "training.kubeflow.org/job-role"
