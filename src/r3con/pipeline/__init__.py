"""The run: the method (`method`), its budgets, the observer that records it (`watch`, `record`), its folder, reuse across runs, resume, estimates."""
