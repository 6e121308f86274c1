"""`airlock record`: a trace of a live cluster's GPU work, from a watch or from the
controller's lifecycle log, that `airlock simulate` replays; and the node pools of a live
cluster, for `airlock simulate --cluster-from`."""
