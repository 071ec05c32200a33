"""One panel per experiment kind (``ExperimentKind.panel``): ``show(entry, prefix)`` draws a
stored result; ``prefix`` starts the keys of its charts."""
