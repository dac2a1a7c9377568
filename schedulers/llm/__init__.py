"""The LLM placement policies (``ngl``, ``expert-offload``, ``weight-streaming``,
``llm-search``): where each unit of an LLM graph's weights lives
(:mod:`~schedulers.llm.residency`), the policies (:mod:`~schedulers.llm.policies`) and the
search over residencies (:mod:`~schedulers.llm.search`)."""
