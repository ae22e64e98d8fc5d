"""Relevance notes: which of the other documents' notes a read is shown (ranked by BM25 or embeddings), and the final notes."""
