"""`r3con estimate`: predict a run's calls, tokens and cost per stage without calling the model, as a range.

The prediction renders the real prompts around the real documents (split as the run would split
them) and counts their tokens (with the endpoint's /tokenize, a tokenizer file, or the estimate);
what only the model can know is assumed and stated: the size of a note, of the schema, of a
document's records, the agent's steps, each with a prior whose ends give the range. `--sample N`
measures them on N documents' real calls and narrows the range.

- `_figures`: the assumptions and the figures (`Assumptions`, `Estimate`, `EstimateRange`);
- `_predict`: one set of assumptions turned into calls and tokens, placed as the run places them;
- `_range`: the range, from the priors or from a sample's draws (`_draws`);
- `_sample`: the sample's real calls; `_endpoint`: the endpoint `run` would use, and sample runs.
"""

from ._draws import Interval, Spread
from ._endpoint import PlannedEndpoint, Projection, plan_endpoint, project, sample_documents
from ._figures import Assumptions, Estimate, EstimateRange, StageEstimate
from ._predict import PER_MESSAGE, Parts, Predictor
from ._range import CONFIDENCE, DRAWS, PRIORS, Priors, estimate_range, estimate_run
from ._sample import sample

__all__ = [
    "CONFIDENCE", "DRAWS", "PER_MESSAGE", "PRIORS", "Assumptions", "Estimate", "EstimateRange", "Interval", "Parts",
    "PlannedEndpoint", "Predictor", "Priors", "Projection", "Spread", "StageEstimate", "estimate_range",
    "estimate_run", "plan_endpoint", "project", "sample", "sample_documents",
]
