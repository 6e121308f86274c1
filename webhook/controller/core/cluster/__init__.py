"""The cluster as the controller tracks it: the pods and nodes the watches report, kept in
indexes that own their updates (`tracking`: where room is, `capacity`; who holds the GPUs,
`occupancy`; who belongs with whom, `membership`; DRA devices, `claiming`; GPU models,
`models`), which nodes a pod may use as the scheduler's filters decide it (`filters`), and
the view one round decides over and may fork for a what-if (`snapshot`)."""
