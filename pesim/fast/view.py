"""A borrowed view of a numba structure reference: a plain pointer to its fields.

The kernel's state and program travel between the compiled functions as structure
references (:mod:`pesim.fast.layout`), and numba counts the references to one with an
atomic increment and decrement at every call that passes it: a tenth of the event
loop's time. Inside one call of the kernel the reference is held by the caller, so the
functions below it can pass a pointer to its fields instead, which costs nothing to
pass and whose fields read as the reference's do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from numba.core import cgutils, imputils, types
from numba.core.datamodel import models
from numba.core.typing.templates import AttributeTemplate
from numba.experimental.structref import _Utils
from numba.extending import infer_getattr, intrinsic, lower_getattr_generic, register_model


class ViewType(types.Type):
    """The fields of a structure reference of type ``ref``, borrowed."""

    def __init__(self, ref: types.StructRef) -> None:
        self.ref = ref
        super().__init__(name=f"View[{ref}]")

    @property
    def field_dict(self) -> dict[str, types.Type]:
        return self.ref.field_dict


@register_model(ViewType)
class _ViewModel(models.PrimitiveModel):
    def __init__(self, dmm: Any, fe_type: ViewType) -> None:
        payload = dmm.lookup(fe_type.ref.get_data_type()).get_value_type()
        super().__init__(dmm, fe_type, payload.as_pointer())


@infer_getattr
class _ViewAttribute(AttributeTemplate):
    key = ViewType

    def generic_resolve(self, typ: Any, attr: Any) -> Any:  # type: ignore[override]
        return typ.field_dict.get(attr)


@lower_getattr_generic(ViewType)
def _view_getattr(context: Any, builder: Any, typ: ViewType, val: Any, attr: str) -> Any:
    fields = cgutils.create_struct_proxy(typ.ref.get_data_type())(context, builder, ref=val)
    return imputils.impl_ret_borrowed(context, builder, typ.field_dict[attr],
                                      getattr(fields, attr))


def _view(typingctx: Any, ref: types.StructRef) -> Any:
    """The fields of ``ref``; valid while the caller holds ``ref``."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return _Utils(context, builder, signature.args[0]).get_data_pointer(args[0])
    return ViewType(ref)(ref), codegen


view = cast(Callable[[Any], Any], intrinsic(_view))


__all__ = ["ViewType", "view"]
