"""A route's life after its gates: what a verdict rests on (`rested_on`), the promotion ledger (`ledger`), promotion
(`promotion`), and the promoted route's state, canary and rollback (`status`). The CLI (`trtls route promote|status|
canary|rollback`) and the editor render what these compute; docs/gates.md, "Promotion and revalidation"."""
