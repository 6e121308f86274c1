"""What explain's expansions share: what an expansion gives (`expansions`), reading a
workload object's fields with errors that name them (`objects`), pods made from templates
as the controllers make them (`templates`), the documents of a file (`documents`) and the
kinds known to make no pods (`kinds`).

Each operator's expansion, following its source at the version the sandbox pins, is its
`making` module in webhook/operators/<name>/; `webhook.operators.registry` lists them.
"""
