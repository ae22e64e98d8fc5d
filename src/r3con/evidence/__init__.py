"""Evidence: each record's passage located in its document, its values checked, and the answer's citations resolved."""
