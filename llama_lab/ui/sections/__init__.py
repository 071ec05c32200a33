"""Each page's sections, one module per page: ``home``, ``params`` (Parameters & FLOPs), ``kv``
(KV cache & attention), ``gradient`` (Gradient norms), ``live`` (Live pass), ``comparison``
(Architecture comparison), ``claims`` (Seed claims), ``report``, ``inference`` (Inference
systems), ``inside`` (Inside the model), ``parallel`` (Many GPUs) and ``validation``.

A page imports the modules it draws (``from llama_lab.ui.sections import kv``) and calls one
function per section. A section module imports the shared machinery of ``llama_lab.ui``
(state, cached wrappers, runs, widgets, derivations, panels) and the package below it, never
another section: what two pages share lives in ``llama_lab.ui`` (the warmup contrast in
``ui.warmup``), or the page draws the other page's section itself (the KV page draws
``parallel.serving_section``)."""
