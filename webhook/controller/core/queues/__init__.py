"""Team queues: quotas and what each queue uses (`quotas`; per GPU model, `modelquotas`),
fair share (`fairshare`), the order units are considered in (`order`), the round's view of
the queues (`queueing`), what the queues remember between rounds (`accounting`) and
running gangs short of members (`shortfalls`)."""
