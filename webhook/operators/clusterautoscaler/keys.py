"""The keys of the cluster-autoscaler's ProvisioningRequest API (k8s.io/autoscaler
cluster-autoscaler/apis, provisioningrequest/autoscaling.x-k8s.io) that Airlock writes and
reads."""

GROUP = "autoscaling.x-k8s.io"
VERSION = "v1"
PLURAL = "provisioningrequests"
# On a pod: the ProvisioningRequest (in its namespace) whose booked capacity it takes,
# and that request's class; the cluster-autoscaler reads both.
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
# Conditions the autoscaler sets on a request's status.
PROVISIONED = "Provisioned"
FAILED = "Failed"
BOOKING_EXPIRED = "BookingExpired"
CAPACITY_REVOKED = "CapacityRevoked"
