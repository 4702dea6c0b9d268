"""Replace some bindings of a module's ``main`` by new values, keeping their names and scopes.

The two steps every binding rewrite of :mod:`graphtune.compiler` shares (the lookup tables of
:mod:`~graphtune.compiler.lut`, the reciprocals of :mod:`~graphtune.compiler.reciprocal`, the
folds of :mod:`~graphtune.compiler.int8_epilogue`): inside
a ``relax.PyExprMutator``, :func:`rebind` emits the new value where the old binding was (a
dataflow var stays one, a block output stays an output) and maps the old var to it;
:func:`rewritten_main` runs the mutator over ``main`` and returns the new module.

Examples
--------
>>> import tvm
>>> from tvm import relax
>>> @relax.expr_functor.mutator
... class Negate(relax.PyExprMutator):
...     def visit_var_binding_(self, binding):
...         if binding.var.name != "y":
...             return super().visit_var_binding_(binding)
...         rebind(self, binding.var, relax.op.negative(self.visit_expr(binding.value.args[0])))
>>> bb = relax.BlockBuilder()
>>> x = relax.Var("x", relax.TensorType([2], "float32"))
>>> with bb.function("main", [x]):
...     with bb.dataflow():
...         y = bb.emit(relax.op.abs(x), name_hint="y")
...         out = bb.emit_output(relax.op.add(y, y))
...     _ = bb.emit_func_output(out)
>>> mod = bb.get()
>>> new = rewritten_main(mod, Negate(mod))
>>> [b.value.op.name for b in new["main"].body.blocks[0].bindings]
['relax.negative', 'relax.add']
"""

from __future__ import annotations

import tvm
from tvm import relax

__all__ = ["rebind", "rewritten_main"]


def rebind(mutator: relax.PyExprMutator, var: relax.Var, value: relax.Expr, name: str | None = None) -> None:
    """Emit ``value`` in ``var``'s place (as an output when ``var`` is one; named ``name``,
    default ``var``'s) and read it wherever ``var`` was read."""
    builder = mutator.builder_
    emit = builder.emit if isinstance(var, relax.DataflowVar) else builder.emit_output
    mutator.set_var_remap(var, emit(value, name_hint=name or var.name))


def rewritten_main(mod: tvm.IRModule, mutator: relax.PyExprMutator) -> tvm.IRModule:
    """``mod`` with ``main`` replaced by ``mutator``'s rewrite of it."""
    main = mutator.visit_expr(mod["main"])
    mutator.builder_.update_func(mod.get_global_var("main"), main)
    return mutator.builder_.get()
