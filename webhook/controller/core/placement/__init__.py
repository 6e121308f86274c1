"""Where a unit goes: a whole gang in one domain (`fitting`), its pods packed onto that
domain's nodes and slices into theirs (`packing`), and the room reserved for the head of
the queue with what may borrow it until the head could start (`backfill`, on run times
stated or learned: `runtimes`), and each pod pinned to its planned node at ungate, with
when a pin has failed its pod (`pins`)."""
