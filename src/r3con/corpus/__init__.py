"""The corpus: files found and read, documents and their parts, the account of every input, and the store that keeps what does not depend on the question."""
