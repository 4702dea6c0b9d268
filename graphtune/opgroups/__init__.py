"""Op groups: pricing what a compiled model runs besides bare kernels and layout transforms.

The layer above :mod:`graphtune.compiler` and :mod:`graphtune.measure`: it
compiles the model with the compiler for a few *probe compiles*, follows every
PrimFunc call of the result to the layout node whose layout it runs in (an
*op group*: a fused kernel with its epilogue, a pool, an unfused join, the
head), measures each group once as a task of :mod:`graphtune.measure`, and adds
the costs to the layout graph's candidates.

- :mod:`graphtune.opgroups.pricing`: probe choices, probe compiles, op costs.
- :mod:`graphtune.opgroups.probe_index`: which probe compiles were done before.
"""
