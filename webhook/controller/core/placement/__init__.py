"""Where a unit goes: a whole gang in one domain, slices in theirs (`fitting`), and the
room reserved for the head of the queue with what may borrow it until the head could
start (`backfill`, on run times stated or learned: `runtimes`)."""
