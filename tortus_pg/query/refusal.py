"""Why an answer is withheld: a value, rendered as a sentence only at the edge.

Code that needs the reason (the evaluation, `tortus-pg bench --answers`, the API) reads the
`Refusal`; the warning a person reads is `Refusal.message(detail)`, where the detail names what
was missing (an identifier, a name, the share of support)."""

from __future__ import annotations

from enum import Enum


class Refusal(Enum):
    """A reason to withhold an answer; each value is the template of its message."""

    MISSING_IDENTIFIER = "no evidence mentions {detail}"
    MISSING_NAME = "no evidence about {detail} answers it"
    LOW_SUPPORT = "the evidence supports an answer too little ({detail})"
    NO_SENTENCE = "no sentence matches the question"
    NO_VALUE_OF_TYPE = "the question asks for {detail} and no sentence that matches it gives one"
    NOT_ABOUT = "no sentence that matches it is about {detail}"
    MODEL_DECLINED = "the model found no answer"
    MODEL_UNSUPPORTED = "no claim of the model is supported by the evidence"
    NO_TIME = "no time left to synthesize"

    def message(self, detail: str = "") -> str:
        """The warning a person reads: "answer withheld: …"."""
        return "answer withheld: " + self.value.format(detail=detail)


# Nothing to draft from: an identifier or a named thing the question names is in no evidence.
HARD_REFUSALS = frozenset({Refusal.MISSING_IDENTIFIER, Refusal.MISSING_NAME})
# Checks of form: they withhold whatever the evidence's support, which is reported as none.
CHECKS_OF_FORM = frozenset({Refusal.MISSING_IDENTIFIER, Refusal.NO_VALUE_OF_TYPE, Refusal.NOT_ABOUT})
