"""The operators whose pods Airlock reads and whose objects `airlock explain` expands, one
folder each:

- `keys`: the label, annotation and other keys the operator writes, spelled once (a unit
  test checks no other module under webhook/ spells them);
- `reading`: its gang convention (`webhook.conventions.base.Convention`): which of its
  pods belong together and, when only its object states the gang's size, where that
  object is and how to read the size off it (`OwnerSized`). The webhook and the
  controller ask it on every admission and every round, so it imports nothing of
  `making` (import-linter checks);
- `making`: the pods its controller makes from the objects people write, for explain
  (`EXPANSIONS`, by API group and kind);
- `integration`: the operator whole (`integrations.Integration`: its conventions and its
  kinds), the one thing the registry imports from the folder.

`registry` lists the integrations, in the order their conventions are asked. A folder
with only `keys` is an operator Airlock marks pods for but does not read (Karpenter, the
cluster-autoscaler).
"""
