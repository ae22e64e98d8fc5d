"""How requests reach an endpoint: the HTTP transport (`endpoint`), the Chat Completions client (`client`),
the Batch API (`batch`), a pool of endpoints (`pool`), whether an endpoint still answers (`liveness`), the
per-document routing key (`routing`), the endpoint's tokenizer (`tokenize`) and the embeddings seam
(`embeddings`)."""
