"""What a server says about itself: the model and the per-request window it serves (`served`, `native` for
Ollama and LM Studio, `routers` for the workers behind a router), how many requests it works on at once
(`slots`), and the servers running on this machine (`local`)."""
