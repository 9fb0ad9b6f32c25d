"""The paper's equations (IMPACT 2020, §4.3 and §5), reproduced with mapping.poly.

Inputs are written by hand from the LAIR listings in isl syntax; every result is
compared by meaning (``is_equal`` after aligning parameters), never by its text.
"""

from __future__ import annotations

from functools import cache

import islpy as isl
import pytest

from dtg.errors import CodegenError
from dtg.mapping import poly
from dtg.mapping.poly import align_params

PARAMS = "[PE_X, PE_Y, index_0, index_1, index]"


def same(a: isl.Set | isl.Map, b: isl.Set | isl.Map, context: isl.Set | None = None) -> bool:
    """Equal as sets/relations, optionally only under the known constraints ``context``."""
    a, b = align_params(a, b)
    if context is not None:
        a, context = align_params(a, context)
        b, context = align_params(b, context)
        a = a.intersect_params(context)
        b = b.intersect_params(context)
    if isinstance(a, isl.Set) and isinstance(b, isl.Set):
        return bool(a.is_equal(b))
    assert isinstance(a, isl.Map) and isinstance(b, isl.Map)
    return bool(a.is_equal(b))


def as_map(ma: isl.MultiAff) -> isl.Map:
    return isl.Map.from_multi_aff(ma)


def as_set(ma: isl.MultiAff) -> isl.Set:
    return isl.Set.from_multi_aff(ma)


def compose(access: isl.Map, to_local: isl.MultiAff) -> isl.Map:
    access, local = align_params(access, isl.Map.from_multi_aff(to_local))
    return access.apply_range(local)


# ---------------------------------------------------------------- Listing 1 (fully connected)

FF_DOMAIN = "{ ff[i, j] : 0 <= i < 32 and 0 <= j < 16 }"
FF_PLACEMENT = "{ ff[i, j] -> PE[j//4, i//8] }"  # eq. (10)
FF_X_ORDER = "{ x[i = 0:15] -> index[i] }"
K_FF = "0 <= index <= 15 and PE_X = floor(index/4) and 0 <= PE_Y <= 3"  # eq. (15)


@cache
def ff_instances() -> isl.Set:
    return poly.task_instances(
        isl.Set(FF_DOMAIN),
        isl.Map(FF_PLACEMENT),
        isl.Map(FF_X_ORDER),
        isl.Map("{ ff[i, j] -> x[j] }"),
    )


def test_local_memory_of_y_eqs_7_to_9() -> None:
    per_pe = poly.elements_per_pe(
        isl.Map(FF_PLACEMENT), isl.Map("{ ff[i = 0:31, j = 0:15] -> y[i] }"), isl.Set(FF_DOMAIN)
    )
    assert same(per_pe, isl.Map("{ PE[0:3, i1 = 0:3] -> y[i = 0:31] : 8i1 <= i <= 7 + 8i1 }"))

    local = poly.local_array(per_pe, "y_local")
    assert local is not None
    assert local.size == (8,)
    assert same(as_map(local.box.offset), isl.Map("{ PE[i0, i1] -> y[8i1] }"))
    assert same(
        as_map(local.to_local), isl.Map("{ [PE[i0, i1] -> y[i]] -> y_local[-8i1 + i] }")
    )  # eq. (8)
    assert same(
        as_map(local.to_local_bound), isl.Map("[PE_X, PE_Y] -> { y[i] -> y_local[-8PE_Y + i] }")
    )  # eq. (9)


def test_tensor_spec_strips_external_pe() -> None:
    spec = isl.Map("{ x[i = 0:15] -> [PE[0, -1] -> index[i]] }")
    assert same(poly.tensor_order(spec), isl.Map(FF_X_ORDER))
    assert same(poly.external_pes(spec), isl.Map("{ x[i = 0:15] -> PE[0, -1] }"))
    with pytest.raises(CodegenError):
        poly.tensor_order(isl.Map(FF_X_ORDER))


def test_base_case_eqs_11_to_12() -> None:
    bound = poly.bind_placement(isl.Map(FF_PLACEMENT), isl.Set(FF_DOMAIN))
    assert same(
        bound,
        isl.Set(
            "[PE_X, PE_Y] -> { ff[i = 0:31, j = 0:15] : "
            "8PE_Y <= i <= 7 + 8PE_Y and 4PE_X <= j <= 3 + 4PE_X }"
        ),
    )  # eq. (11)
    assert same(
        poly.bind_order(isl.Map(FF_X_ORDER)), isl.Set("[index] -> { x[index] : 0 <= index <= 15 }")
    )
    assert same(
        poly.index_constraints(isl.Map(FF_X_ORDER), isl.Map("{ ff[i0, i1] -> x[i1] }")),
        isl.Set("[index] -> { ff[i0, index] : 0 <= index <= 15 }"),
    )
    assert same(
        ff_instances(),
        isl.Set(
            "[PE_X, PE_Y, index] -> { ff[i = 0:31, j = index] : 0 <= index <= 15 and "
            "PE_X = floor(index/4) and 8PE_Y <= i <= 7 + 8PE_Y }"
        ),
    )  # eq. (12)


def test_base_case_rectangularity_eqs_13_to_16() -> None:
    rect = poly.rectangularity(ff_instances())
    known = isl.Set(f"[PE_X, PE_Y, index] -> {{ : {K_FF} }}")
    assert same(rect.context, known)  # eq. (15)
    assert same(
        isl.Set.from_multi_pw_aff(rect.minimum),
        isl.Set(f"[PE_X, PE_Y, index] -> {{ ff[8PE_Y, index] : {K_FF} }}"),
    )  # eq. (13)
    assert same(
        isl.Set.from_multi_pw_aff(rect.maximum),
        isl.Set(f"[PE_X, PE_Y, index] -> {{ ff[7 + 8PE_Y, index] : {K_FF} }}"),
    )  # eq. (14)
    assert rect.dense
    assert same(rect.box, ff_instances())
    assert same(rect.sizes, isl.Set(f"[PE_X, PE_Y, index] -> {{ ff[8, 1] : {K_FF} }}"))  # (16)
    assert same(isl.Set.from_multi_pw_aff(rect.size), isl.Set("{ ff[8, 1] }"))  # simplified
    assert rect.fixed and rect.rectangular
    assert rect.constant_size == (8, 1)


def test_compression_of_base_case_eqs_18_to_21() -> None:
    comp = poly.compress(ff_instances())
    assert same(as_map(comp.map), isl.Map("[index] -> { [i0] -> ff[i0, index] }"))  # eq. (18)
    eq19 = isl.Set(
        "[PE_X, PE_Y, index] -> { [i0 = 0:31] : 0 <= index <= 15 and PE_X = floor(index/4) "
        "and 8PE_Y <= i0 <= 7 + 8PE_Y }"
    )
    assert same(comp.compressed, eq19)
    rect = poly.rectangularity(comp.compressed)
    assert same(
        isl.Set.from_multi_pw_aff(rect.minimum),
        isl.Set(f"[PE_X, PE_Y, index] -> {{ [8PE_Y] : {K_FF} }}"),
    )  # eq. (20)
    assert same(
        isl.Set.from_multi_pw_aff(rect.maximum),
        isl.Set(f"[PE_X, PE_Y, index] -> {{ [7 + 8PE_Y] : {K_FF} }}"),
    )
    assert same(rect.sizes, isl.Set(f"[PE_X, PE_Y, index] -> {{ [8] : {K_FF} }}"))  # eq. (21)
    assert rect.rectangular


def test_box_hull_of_base_case_example_5_8() -> None:
    approx = poly.approximate_by_box(poly.compress(ff_instances()).compressed)
    assert approx is not None
    assert approx.box.size == (8,)
    assert same(as_set(approx.box.offset), isl.Set("[PE_Y] -> { [8PE_Y] }"))
    assert approx.exact


# ---------------------------------------------------------------- Listing 3 (1-D convolution)

K_1D = "PE_X = 0 and 0 <= index <= 15 and 0 <= PE_Y <= 1"
C1_ACCESS_W = "{ C[i0, i1, i2] -> W[i0, i2] }"  # eq. (25)
C1_ACCESS_Y = "{ C[i0, i1, i2] -> y[i0, i1] }"
C1_DOMAIN = "{ C[k, w, rw] : 0 <= k < 2 and 0 <= w < 14 and 0 <= rw < 3 }"
C1_PLACEMENT = "{ C[k, w, rw] -> PE[0, k] }"


@cache
def conv1d_instances() -> isl.Set:
    return poly.task_instances(
        isl.Set(C1_DOMAIN),
        isl.Map(C1_PLACEMENT),
        isl.Map("{ x[w = 0:15] -> index[w] }"),
        isl.Map("{ C[k, w, rw] -> x[w + rw] }"),
    )


@cache
def conv1d_compression() -> poly.Compression:
    return poly.compress(conv1d_instances())


def known_1d() -> isl.Set:
    return isl.Set(f"[PE_X, PE_Y, index] -> {{ : {K_1D} }}")


def test_conv1d_instances_eq_17() -> None:
    expected = isl.Set(
        "[PE_X, PE_Y, index] -> { C[k = PE_Y, w = 0:13, rw = index - w] : "
        f"{K_1D} and -2 + index <= w <= index }}"
    )
    assert same(conv1d_instances(), expected)
    rect = poly.rectangularity(conv1d_instances())
    assert not rect.dense  # a diagonal, not a box


def test_conv1d_compression_eqs_22_23() -> None:
    comp = conv1d_compression()
    assert comp.dim == 1
    assert same(
        as_map(comp.map), isl.Map("[PE_Y, index] -> { [i0] -> C[PE_Y, index - i0, i0] }")
    )  # eq. (22)
    assert same(
        comp.compressed,
        isl.Set(f"[PE_X, PE_Y, index] -> {{ [i0 = 0:2] : {K_1D} and -13 + index <= i0 <= index }}"),
    )  # eq. (23)
    assert same(as_map(comp.inverse), isl.Map("{ C[k, w, rw] -> [rw] }"))


def test_conv1d_size_eq_24() -> None:
    rect = poly.rectangularity(conv1d_compression().compressed)
    assert rect.dense
    assert not rect.fixed
    eq24 = isl.Set(
        "[index] -> { [16 - index] : index >= 13; [3] : 2 <= index <= 12; "
        "[1 + index] : index <= 1 }"
    )
    assert same(isl.Set.from_multi_pw_aff(rect.size), eq24, known_1d())
    assert same(rect.sizes, eq24.intersect_params(known_1d().align_params(eq24.get_space())))


def test_conv1d_rewritten_accesses_eq_26() -> None:
    comp = conv1d_compression()
    assert same(
        poly.rewrite_access(isl.Map(C1_ACCESS_W), comp),
        isl.Map("[PE_Y] -> { [i0] -> W[PE_Y, i0] }"),
    )
    assert same(
        poly.rewrite_access(isl.Map(C1_ACCESS_Y), comp),
        isl.Map("[PE_Y, index] -> { [i0] -> y[PE_Y, index - i0] }"),
    )


def test_conv1d_box_hull_eqs_35_36() -> None:
    approx = poly.approximate_by_box(conv1d_compression().compressed)
    assert approx is not None
    assert approx.box.size == (3,)
    assert same(as_set(approx.box.offset), isl.Set("{ [0] }"))
    assert same(approx.approximated, isl.Set(f"[PE_X, PE_Y, index] -> {{ [0:2] : {K_1D} }}"))
    eq36 = isl.Set("[index] -> { [1 + index:2]; [0:-14 + index] }")
    assert same(approx.extra, eq36, known_1d())
    assert not approx.exact


@cache
def conv1d_local_arrays() -> tuple[poly.LocalArray, poly.LocalArray]:
    domain, placement = isl.Set(C1_DOMAIN), isl.Map(C1_PLACEMENT)
    arrays = []
    for access, name in ((C1_ACCESS_W, "W_local"), (C1_ACCESS_Y, "y_local")):
        local = poly.local_array(poly.elements_per_pe(placement, isl.Map(access), domain), name)
        assert local is not None
        arrays.append(local)
    return arrays[0], arrays[1]


def test_conv1d_local_arrays() -> None:
    w_local, y_local = conv1d_local_arrays()
    assert w_local.size == (1, 3)
    assert y_local.size == (1, 14)
    assert same(as_map(w_local.box.offset), isl.Map("{ PE[i0, i1] -> W[i1, 0] }"))
    assert same(as_map(y_local.box.offset), isl.Map("{ PE[i0, i1] -> y[i1, 0] }"))


def test_conv1d_extra_accesses_eqs_37_to_41() -> None:
    comp = conv1d_compression()
    approx = poly.approximate_by_box(comp.compressed)
    assert approx is not None
    w_local, y_local = conv1d_local_arrays()
    read = compose(poly.rewrite_access(isl.Map(C1_ACCESS_W), comp), w_local.to_local_bound)
    assert same(read, isl.Map("{ [i0] -> W_local[0, i0] }"))  # eq. (37)
    extra_reads = poly.accessed_elements(approx.extra, read)
    eq38 = isl.Set("[index] -> { W_local[0, 1 + index:2]; W_local[0, 0:-14 + index] }")
    assert same(extra_reads, eq38, known_1d())
    read_bounds = isl.Set("{ W_local[0, 0:2] }")
    assert extra_reads.is_subset(read_bounds.align_params(extra_reads.get_space()))

    write = compose(poly.rewrite_access(isl.Map(C1_ACCESS_Y), comp), y_local.to_local_bound)
    assert same(write, isl.Map("[index] -> { [i0] -> y_local[0, index - i0] }"))  # eq. (39)
    check = poly.check_extra_writes(comp.compressed, approx.extra, write)
    pes = "PE_X = 0 and 0 <= PE_Y <= 1"
    assert same(check.proper, isl.Set(f"[PE_X, PE_Y] -> {{ y_local[0, 0:13] : {pes} }}"))
    assert same(
        check.extra,
        isl.Set(f"[PE_X, PE_Y] -> {{ y_local[0, 14:15] : {pes}; y_local[0, -2:-1] : {pes} }}"),
    )  # eq. (41)
    assert check.disjoint

    extended = poly.set_box_hull(check.proper.union(check.extra))
    assert extended is not None
    assert extended.size == (1, 18)
    assert same(as_set(extended.offset), isl.Set("{ y_local[0, -2] }"))


def test_size_enumeration_eqs_42_43() -> None:
    rect = poly.rectangularity(conv1d_compression().compressed)
    sizes = poly.enumerate_sizes(rect.sizes)
    assert sizes is not None
    assert same(
        sizes.sizes, isl.Set("[PE_X, PE_Y] -> { [1:3] : PE_X = 0 and 0 <= PE_Y <= 1 }")
    )  # eq. (42)
    assert sizes.box.size == (3,)
    assert same(as_set(sizes.box.offset), isl.Set("{ [1] }"))
    assert same(sizes.identifiers, isl.Set("{ [0:2] }"))  # eq. (43)
    assert [key for key, _ in sizes.entries] == [(0,), (1,), (2,)]
    for key, expected in ((0, 1), (1, 2), (2, 3)):
        assert same(as_set(sizes.size_of((key,))), isl.Set(f"{{ [{expected}] }}"))


# ---------------------------------------------------------------- Listing 4 (2-D convolution)

K_2D = "PE_X = 0 and 0 <= index_0 <= 15 and 0 <= index <= 15 and 0 <= PE_Y <= 1"


@cache
def conv2d_instances() -> isl.Set:
    return poly.task_instances(
        isl.Set(
            "{ C[k, w, h, rw, rh] : 0 <= k < 2 and 0 <= w < 14 and 0 <= h < 14 "
            "and 0 <= rw < 3 and 0 <= rh < 3 }"
        ),
        isl.Map("{ C[k, w, h, rw, rh] -> PE[0, k] }"),
        isl.Map("{ x[w = 0:15, h = 0:15] -> index[w, h] }"),
        isl.Map("{ C[k, w, h, rw, rh] -> x[w + rw, h + rh] }"),
    )


def test_conv2d_eqs_27_to_29() -> None:
    eq27 = isl.Set(
        "[PE_X, PE_Y, index_0, index] -> { C[k = PE_Y, w = 0:13, h = 0:13, "
        f"rw = index_0 - w, rh = index - h] : {K_2D} and -2 + index_0 <= w <= index_0 "
        "and -2 + index <= h <= index }"
    )
    assert same(conv2d_instances(), eq27)
    comp = poly.compress(conv2d_instances())
    eq28 = isl.Map(
        "[PE_Y, index_0, index] -> { [i0, i1] -> C[PE_Y, index_0 - i0, index - i1, i0, i1] }"
    )
    assert same(as_map(comp.map), eq28)
    eq29 = isl.Set(
        f"[PE_X, PE_Y, index_0, index] -> {{ [i0 = 0:2, i1 = 0:2] : {K_2D} and "
        "-13 + index_0 <= i0 <= index_0 and -13 + index <= i1 <= index }"
    )
    assert same(comp.compressed, eq29)
    rect = poly.rectangularity(comp.compressed)
    assert rect.dense and not rect.fixed  # "rectangular box of non-constant size"


# ---------------------------------------------------------------- Listing 5 (degenerate 2-D)


@cache
def degenerate_instances() -> isl.Set:
    return poly.task_instances(
        isl.Set("{ C[k, h, w, c] : 0 <= k < 4 and 0 <= h < 8 and 0 <= w < 8 and 0 <= c < 4 }"),
        isl.Map("{ C[k, h, w, c] -> PE[k//2 + 2*(w//4), 2*(h//4) + c//2] }"),  # eq. (30)
        isl.Map("{ x[h = 0:7, w = 0:7, c = 0:3] -> index[h mod 4, w, c mod 2] }"),  # eq. (31)
        isl.Map("{ C[k, h, w, c] -> x[h, w, c] }"),
    )


def test_degenerate_eqs_32_to_34() -> None:
    eq32 = isl.Set(
        f"{PARAMS} -> {{ C[k = 0:3, h = 0:7, w = index_1, c = index_0 + index + 2PE_Y - h] : "
        "(index_0 - h) mod 4 = 0 and 0 <= index_0 <= 3 and 0 <= index_1 <= 7 and "
        "0 <= index <= 1 and h <= index_0 + index + 2PE_Y <= h + 3 and "
        "2PE_X - k <= 4*floor(index_1/4) <= 1 + 2PE_X - k }"
    )
    assert same(degenerate_instances(), eq32)
    comp = poly.compress(degenerate_instances())
    eq33 = isl.Map(
        f"{PARAMS} -> {{ [i0, i1] -> C[i0, index_0 - 4i1, index_1, index + 2PE_Y + 4i1] }}"
    )
    assert same(as_map(comp.map), eq33)
    eq34 = isl.Set(
        f"{PARAMS} -> {{ [i0 = 0:3, i1 = floor((3 - index - 2PE_Y)/4)] : "
        "0 <= index_0 <= 3 and 0 <= index_1 <= 7 and 0 <= index <= 1 and "
        "-7 + index_0 <= 4i1 <= index_0 and 2PE_X - i0 <= 4*floor(index_1/4) <= 1 + 2PE_X - i0 }"
    )
    assert same(comp.compressed, eq34)
    # The strided h became dense: the lifted existential is the second coordinate.
    assert same(
        as_map(comp.inverse),
        isl.Map(f"{PARAMS} -> {{ C[k, h, w, c] -> [k, floor((index_0 - h)/4)] }}"),
        isl.Set(f"{PARAMS} -> {{ : 0 <= index_0 <= 3 }}"),
    )


def test_degenerate_compressed_set_is_a_box() -> None:
    rect = poly.rectangularity(poly.compress(degenerate_instances()).compressed)
    assert rect.dense
    # Paper: "a rectangular box of non-constant size".  Its extent is in fact 2 x 1 for
    # every PE and every index value (checked by enumeration in the property tests).
    assert rect.fixed
    assert rect.constant_size == (2, 1)


# ---------------------------------------------------------------- errors


def test_user_errors_raise_codegen_error() -> None:
    with pytest.raises(CodegenError):
        poly.bind_placement(isl.Map("{ ff[i, j] -> PE[j] }"))
    with pytest.raises(CodegenError):
        poly.task_instances(
            isl.Set(FF_DOMAIN),
            isl.Map(FF_PLACEMENT),
            isl.Map("{ z[i = 0:15] -> index[i] }"),
            isl.Map("{ ff[i, j] -> x[j] }"),
        )
    with pytest.raises(CodegenError):
        poly.bind_range(isl.Map("{ x[i] -> index[i, i] }"), ["index"])


def test_no_box_is_none() -> None:
    assert poly.set_box_hull(isl.Set("[n] -> { [i] : 0 <= i <= n }")) is None
    assert poly.range_box_hull(isl.Map("{ [d] -> [i] : 0 <= i <= d }")) is None


def test_index_names() -> None:
    assert poly.index_names(1) == ("index",)
    assert poly.index_names(2) == ("index_0", "index")
    assert poly.index_names(3) == ("index_0", "index_1", "index")
    assert poly.index_params(degenerate_instances()) == ("index_0", "index_1", "index")


def test_box_offsets_may_be_quasi_affine() -> None:
    """§4.3 allows a quasi-affine offset: ``i = floor(d/4)`` has a box of size 1 at
    ``floor(d/4)``; only SIMD boxes ask for a purely affine one (and get none here)."""
    rel = isl.Map("{ [d] -> [i] : 0 <= d <= 15 and i = floor(d/4) }")
    box = poly.range_box_hull(rel)
    assert box is not None and box.size == (1,)
    assert box.offset.involves_locals()
    assert poly.box_map(box).intersect_domain(rel.domain()).is_equal(rel)
    assert poly.range_box_hull(rel, affine=True) is None
    halves = isl.Map("{ PE[x, 2] -> M[m, k] : 2m = x and 0 <= x <= 4 and 0 <= k <= 1 }")
    box = poly.range_box_hull(halves)
    assert box is not None and box.size == (1, 2)
    assert halves.is_subset(poly.box_map(box))
