"""Kernel classifier: which share of a workload's GPU time could a generated kernel address?

Every CUDA kernel (or, on CPU, every aten op) that a profiled workload runs gets two labels:

* a **bucket** -- what kind of kernel it is, decided mostly by its name:

  - ``already_optimal``: vendor-library compute that a generated kernel is not expected to beat: cuBLAS /
    cuBLASLt / CUTLASS GEMMs (``nvjet_*``, ``sm90_xmma_gemm_*``, ``ampere_*gemm*``, ``cutlass*gemm*``), cuDNN
    convolutions, flash / cuDNN / memory-efficient attention, NCCL collectives. "Already optimal" is a claim
    about the library, not a roofline measurement;
  - ``addressable``: PyTorch's own kernels that a generated kernel competes with: elementwise, normalisation,
    softmax, reductions, pooling, losses, embedding, gather/scatter/index, top-k/sort, scans, optimizer steps
    (``multi_tensor_apply_kernel``);
  - ``overhead``: data movement that is not the op's computation: copies and casts, layout transforms, fills,
    ``memset`` / ``memcpy``, ``cat``;
  - ``unclassified``: a name no rule knows. The profiler fails a profile whose unclassified share is above its
    budget, so a vendor renaming its kernels (``sm90_xmma_gemm`` -> ``nvjet``) is caught instead of being
    silently counted as addressable work.

* a **family** from :data:`FAMILIES` -- *which op governs the time*. It comes from the launching op (the
  outermost aten op, or a region label such as ``kbenv::interaction`` or ``Optimizer.step#SGD.step``) when that
  op is known, and from the kernel's name otherwise. Family and bucket are independent axes: a copy launched by
  ``aten::embedding_bag`` is (overhead, embedding); the ``bmm`` inside DLRM's interaction is (already_optimal,
  interaction). The family share is what Amdahl's law needs (a candidate that replaces an op replaces every
  kernel the op launches); the bucket split is the paper's Table 3.

The name rules follow the names measured on an H200 with torch 2.11 / CUDA 13.0 / cuDNN 9.19 and the A100-era
names of public traces (see the golden table in ``tests/rewards/test_classify.py``). Rules run in order, first
match wins; order matters: copy and fill kernels are also ``elementwise_kernel`` instances, cuDNN SDPA names
contain ``cudnn``, and xmma dgrad/wgrad names contain ``gemm``.

A few helper kernels are ambiguous by name alone: CUB sort/scan/select passes, ``arange``-style
``elementwise_kernel_with_index`` and ``_assert_async`` bounds checks. Inside an embedding, indexing, top-k or
scan op they are part of the op's algorithm (addressable); elsewhere arange and asserts are overhead.

CPU profiles classify aten op names (``aten::addmm``, ``aten::native_layer_norm`` ...) with the same function:
vendor-backed compute ops (mm, convolution, SDPA kernels) are already_optimal, view/copy/allocation ops are
overhead, and any other ``aten::`` op is addressable (it is one of ATen's own kernels).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "BUCKETS",
    "FAMILIES",
    "ALREADY_OPTIMAL",
    "ADDRESSABLE",
    "OVERHEAD",
    "UNCLASSIFIED",
    "Classification",
    "classify_kernel",
    "explain_kernel",
    "context_family",
]

ALREADY_OPTIMAL = "already_optimal"
ADDRESSABLE = "addressable"
OVERHEAD = "overhead"
UNCLASSIFIED = "unclassified"
BUCKETS = (ALREADY_OPTIMAL, ADDRESSABLE, OVERHEAD, UNCLASSIFIED)

FAMILIES = (
    "matmul",
    "conv",
    "attention",
    "elementwise",
    "softmax",
    "normalization",
    "pooling",
    "reduction",
    "scan",
    "loss",
    "embedding",
    "gather_scatter",
    "topk",
    "interaction",
    "optimizer",
    "copy",
)

# Families whose ops run multi-kernel algorithms (sort, scan, unique, arange keys, bounds checks): helper
# kernels launched inside them belong to the op's computation.
_ALGORITHMIC_FAMILIES = frozenset({"embedding", "gather_scatter", "topk", "scan", "optimizer", "interaction"})


@dataclass(frozen=True)
class Classification:
    bucket: str
    family: str | None  # None only for unclassified names without a known launching op
    rule: str  # name of the rule that matched, for diagnostics


# ---------------------------------------------------------------------------------------------------------------
# Launching op (context) -> family. Applied to the aten op or region label that launched the kernel.
# ---------------------------------------------------------------------------------------------------------------

_LABEL_RE = re.compile(r"^kbenv::(\w+)")

_CONTEXT_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (family, re.compile(pattern))
    for family, pattern in (
        (
            "optimizer",
            r"^Optimizer\.(step|zero_grad)#|^aten::_foreach_|^aten::_fused_(adam|adamw|sgd|adagrad)"
            r"|^aten::_amp_foreach|^aten::_amp_update_scale",
        ),
        (
            "attention",
            r"scaled_dot_product|flash_attention|efficient_attention|cudnn_attention|_flash_attn"
            r"|multi_head_attention|_fused_sdp",
        ),
        (
            "conv",
            r"^aten::(_?convolution\w*|conv\w*|cudnn_convolution\w*|mkldnn_convolution\w*|miopen_convolution\w*"
            r"|_?slow_conv\w*|thnn_conv\w*|_nnpack\w*)$",
        ),
        (
            "matmul",
            r"^aten::(linear|linear_backward|addmm|addmm_|mm|bmm|matmul|baddbmm|addbmm|addmv|mv|dot|vdot"
            r"|_addmm_activation|_scaled_mm|_int_mm|mkldnn_linear\w*|_mkldnn\w*linear\w*|linalg_matmul"
            r"|tensordot|einsum|chain_matmul|_mkl_linear)$",
        ),
        ("embedding", r"^aten::\w*embedding\w*$"),
        (
            "normalization",
            r"^aten::(\w*batch_norm\w*|\w*layer_norm\w*|\w*group_norm\w*|\w*instance_norm\w*|\w*rms_norm\w*"
            r"|local_response_norm|batch_norm_\w+)$",
        ),
        (
            "loss",
            r"^aten::(cross_entropy_loss|nll_loss\w*|binary_cross_entropy\w*|\w+_loss\w*|kl_div\w*|ctc_loss\w*)$",
        ),
        ("softmax", r"^aten::\w*softmax\w*$"),
        ("pooling", r"^aten::\w*pool\w*$"),
        ("topk", r"^aten::(topk|sort|argsort|msort|kthvalue|median|nanmedian|mode|_?unique\w*)$"),
        ("scan", r"^aten::_?(cumsum|cumprod|cummax|cummin|logcumsumexp)\w*$"),
        (
            "gather_scatter",
            r"^aten::(_?index\w*|_unsafe_index\w*|gather\w*|scatter\w*|take\w*|put_?|masked_select\w*"
            r"|masked_scatter\w*|nonzero\w*|_sparse\w*|sparse\w*|_coalesce\w*|coalesce)$",
        ),
        (
            "reduction",
            r"^aten::(sum|mean|amax|amin|max|min|prod|norm|linalg_vector_norm|linalg_norm|std|var|std_mean"
            r"|var_mean|argmax|argmin|all|any|logsumexp|count_nonzero|aminmax|nansum|nanmean)$",
        ),
        (
            "copy",
            r"^aten::(copy_|to|_to_copy|contiguous|clone|cat|_cat|stack|hstack|vstack|permute|transpose|t"
            r"|numpy_T|view|view_as|reshape|_reshape_alias|expand|expand_as|repeat|narrow|slice|select"
            r"|split\w*|chunk|unbind|flatten|unflatten|squeeze\w*|unsqueeze\w*|zero_|fill_|zeros\w*|ones\w*"
            r"|empty\w*|full\w*|new_\w+|arange|detach\w*|alias|as_strided\w*|lift\w*|_unsafe_view|constant_pad_nd"
            r"|pad|resize_\w*|set_|item|_local_scalar_dense|tril_indices|triu_indices|resolve_\w+|_to_dense"
            r"|slice_backward|select_backward|_pin_memory|pin_memory)$",
        ),
    )
)


def context_family(aten_op: str | None) -> str | None:
    """The family of the op (``aten::...``, ``kbenv::<family>`` label or ``Optimizer.step#...``) that launched a
    kernel, or None when the op alone does not say (plain elementwise ops, unknown names)."""
    if not aten_op:
        return None
    op = aten_op.strip()
    m = _LABEL_RE.match(op)
    if m and m.group(1) in FAMILIES:
        return m.group(1)
    op = op.split(".", 1)[0] if op.startswith("aten::") else op  # drop an overload suffix (aten::add.Tensor)
    for family, pattern in _CONTEXT_RULES:
        if pattern.search(op):
            return family
    return None


# ---------------------------------------------------------------------------------------------------------------
# Kernel name -> bucket (and a default family). First match wins.
#   kind "fixed":  bucket as given.
#   kind "helper": addressable when launched inside an algorithmic op (embedding, indexing, top-k, scan,
#                  optimizer, interaction); otherwise the given bucket.
# ---------------------------------------------------------------------------------------------------------------

_NAME_RULES: tuple[tuple[str, str, str, str, re.Pattern[str]], ...] = tuple(
    (rule, bucket, family, kind, re.compile(pattern))
    for rule, bucket, family, kind, pattern in (
        # --- overhead: memcpy / memset activities, copies, casts, cat, layout transforms, fills -----------------
        ("memcpy_memset", OVERHEAD, "copy", "fixed", r"^\s*(Memcpy|Memset)\b|\[CUDA mem(cpy|set)"),
        ("comm", ALREADY_OPTIMAL, "copy", "fixed", r"\bncclDevKernel_|\bncclKernel|\bnccl[A-Z]\w*Kernel"),
        (
            "copy_cast_cat",
            OVERHEAD,
            "copy",
            "fixed",
            r"direct_copy_kernel|\w*copy_kernel_cuda|copy_device_to_device|CatArrayBatchedCopy|CatArray\w*Copy"
            r"|\bcat_array\w*kernel|_pin_memory",
        ),
        (
            "layout_or_workspace",
            OVERHEAD,
            "copy",
            "fixed",
            r"nchwToNhwc|nhwcToNchw|cubeTransposeDeviceGeneric|transpose_readWrite|init_device_workspace_kernel"
            r"|tensorTransformGeneric|transpose_kernel|permute_kernel",
        ),
        ("fill", OVERHEAD, "copy", "fixed", r"FillFunctor|\bfill_kernel|fill_cuda|fill_reverse_indices|zero_kernel"),
        (
            "arange_helper",
            OVERHEAD,
            "copy",
            "helper",
            r"arange_cuda_out|linspace_cuda_out|range_cuda_out|elementwise_kernel_with_index",
        ),
        ("assert_helper", OVERHEAD, "copy", "helper", r"_assert_async"),
        # --- legacy cuDNN batch norm: bandwidth-bound, kept out of "conv" ---------------------------------------
        ("norm_cudnn", ADDRESSABLE, "normalization", "fixed", r"\bbn_(fw|bw)_|cudnn\w*::\w*[Bb]atch[Nn]orm"),
        ("op_tensor_cudnn", ADDRESSABLE, "elementwise", "fixed", r"\bop_tensor_kernel"),
        # --- already optimal: attention, convolution, GEMM ------------------------------------------------------
        (
            "attention",
            ALREADY_OPTIMAL,
            "attention",
            "fixed",
            r"flash_fwd|flash_bwd|pytorch_flash::|\bflash::|FlashAttn|fmha_cutlass[FB]|PyTorchMemEffAttention"
            r"|AttentionKernel|AttentionBackwardKernel|_sdpa_|cudnn_generated_fort_native_sdpa|\bfmha_|\bfmha\w*kernel"
            r"|flashinfer|PagedKVCache|cudnn::fusion::(compute_dot_do_o|convert_dq)",
        ),
        (
            "conv",
            ALREADY_OPTIMAL,
            "conv",
            "fixed",
            r"\bsm\d+_xmma_(fprop|dgrad|wgrad)|\bxmma_(fprop|dgrad|wgrad)|__5x_cudnn|\bcudnn::|cudnn_generated"
            r"|implicit_convolve_sgemm|precomputed_convolve|scudnn|winograd|fft2d_|fft1d_|cask_plugin|cask_cudnn"
            r"|explicit_convolve|convolve_common_engine|_implicit_gemm|cutlass\w*[Cc]onv|Conv2d(Fprop|Dgrad|Wgrad)"
            r"|\bconv2d_(grouped_)?(direct|c1_k1)",
        ),
        (
            "gemm",
            ALREADY_OPTIMAL,
            "matmul",
            "fixed",
            r"\bnvjet_|\bsm\d+_xmma_gemm|\bxmma_gemm|\b(maxwell|volta|turing|ampere|hopper|blackwell|sm\d+)_\w*gemm"
            r"|cutlass_\d+\w*gemm|cutlass\w*::Kernel2?<|cutlass::device_kernel<|\bgemv\w*|gemmSN_\w*kernel"
            r"|gemmk1_kernel|splitKreduce_kernel|cublasLt::|\bcublas|\bgemm_kernel|\bdot_kernel<|\btriton_tem_"
            r"|\b[sdhcz]gemm_?\w*<|\b[sdhcz]gemm_\w+",
        ),
        # --- addressable -----------------------------------------------------------------------------------------
        (
            "fbgemm_tbe",
            ADDRESSABLE,
            "embedding",
            "fixed",
            r"split_embedding|dense_embedding|ssd_embedding|batch_index_select_dim0|_embedding_nobag"
            r"|bounds_check_indices|linearize_index|lxu_cache|lru_cache|lfu_cache|permute_[12]D_|jagged"
            r"|pack_segments|complete_cumsum|bucketize_sparse",
        ),
        (
            "embedding",
            ADDRESSABLE,
            "embedding",
            "fixed",
            r"EmbeddingBag_|embedding_bag|compute_grad_weight|sum_and_scatter|krn_partial"
            r"|compute_num_of_partial_segments|embedding_backward|embedding_renorm|renorm_kernel|embedding_dense",
        ),
        (
            "sparse",
            ADDRESSABLE,
            "gather_scatter",
            "fixed",
            r"coalesceValuesKernel|sparseElementwiseKernel|SparseCUDA|_sparse_\w*kernel|\bsparse_\w*kernel"
            r"|coalesce\w*[Kk]ernel",
        ),
        (
            "gather_scatter",
            ADDRESSABLE,
            "gather_scatter",
            "fixed",
            r"vectorized_gather_kernel|indexSelect(Large|Small)Index|index_select\w*kernel|index_elementwise_kernel"
            r"|_scatter_gather_elementwise_kernel|scatter_gather|indexFunc(Large|Small)Index|indexing_backward_kernel"
            r"|index(Copy|Fill|Put|Add)(Large|Small)?\w*|index_put\w*kernel|masked_scatter|masked_select"
            r"|\btake_kernel|\bput_kernel|\bgather_kernel|\bscatter_kernel|nonzero|write_indices|flag_kernel",
        ),
        (
            "normalization",
            ADDRESSABLE,
            "normalization",
            "fixed",
            r"layer_norm|LayerNorm|RowwiseMoments|GammaBetaBackward|ComputeInternalGradients|rms_?norm|RMSNorm"
            r"|batch_norm|BatchNorm|group_norm|GroupNorm|instance_norm",
        ),
        (
            "softmax",
            ADDRESSABLE,
            "softmax",
            "fixed",
            r"softmax_warp_(forward|backward)|cunn_(Spatial)?SoftMax|SoftMax(Forward|Backward)|softmax|SoftMax",
        ),
        (
            "loss",
            ADDRESSABLE,
            "loss",
            "fixed",
            r"nll_loss|cross_entropy|binary_cross_entropy|mse_loss|smooth_l1|huber|ctc_loss|multi_margin"
            r"|multilabel_margin|kl_div|soft_margin|ClassNLLCriterion",
        ),
        (
            "pooling",
            ADDRESSABLE,
            "pooling",
            "fixed",
            r"max_pool|avg_pool|MaxPool|AvgPool|adaptive_(avg|max)_pool|adaptive_average|adaptive_max"
            r"|AdaptiveAvgPool|AdaptiveMaxPool|atomic_adaptive|avg_pool2d|max_unpool",
        ),
        (
            "topk_sort",
            ADDRESSABLE,
            "topk",
            "fixed",
            r"mbtopk::|sbtopk::|gatherTopK|radixSortKVInPlace|bitonicSort|radixFindKthValues|sortKeyValueInplace"
            r"|segmented_sort|DeviceRadixSort|DeviceSegmentedRadixSort|DeviceSegmentedSort|DeviceMergeSort"
            r"|RadixSort|Onesweep|sort_postprocess|\bsort_kernel|\btopk",
        ),
        (
            "scan",
            ADDRESSABLE,
            "scan",
            "fixed",
            r"DeviceScan|ScanByKey|scan_innermost_dim|scan_outer_dim|tensor_kernel_scan|cumsum|cumprod"
            r"|logcumsumexp|\bscan_\w*kernel",
        ),
        (
            "cub_select",
            ADDRESSABLE,
            "gather_scatter",
            "helper",
            r"DeviceSelect|DeviceUnique|DeviceCompact|DevicePartition|DeviceRunLengthEncode|unique_by_key",
        ),
        ("cub_other", ADDRESSABLE, "reduction", "helper", r"\bcub::|at_cuda_detail::cub|\bcub\d*::|DeviceReduce"),
        (
            "optimizer",
            ADDRESSABLE,
            "optimizer",
            "fixed",
            r"multi_tensor_apply|FusedAdam|fused_adam|FusedSgd|fused_sgd|lpnorm_cleanup|_foreach\w*kernel",
        ),
        ("triton_reduction", ADDRESSABLE, "reduction", "fixed", r"\btriton_(red|per)_"),
        ("triton_pointwise", ADDRESSABLE, "elementwise", "fixed", r"\btriton_(poi|for)_|\btriton_"),
        (
            "reduction",
            ADDRESSABLE,
            "reduction",
            "fixed",
            r"\breduce_kernel|reduce_1Block|ReduceOp|reduce_kernel_impl|\bnorm_kernel|ReduceNorm|reduction_kernel",
        ),
        (
            "elementwise",
            ADDRESSABLE,
            "elementwise",
            "fixed",
            r"vectorized_elementwise_kernel|unrolled_elementwise_kernel|\belementwise_kernel"
            r"|vectorized_templated_elementwise_kernel|elementwise_kernel_for_multi_outputs|fused_dropout"
            r"|distribution_elementwise|\bbernoulli|philox|CUDAFunctor|GeluCUDAKernel",
        ),
        # Any other kernel in ATen's own namespace is one of PyTorch's kernels (never a vendor library's), so
        # it is addressable work; its family comes from the launching op.
        ("aten_native_other", ADDRESSABLE, "elementwise", "fixed", r"\bat::native::|\bat::cuda::"),
    )
)

# CPU profiles: the "kernel" is the aten op that did the work (self time).
_CPU_ALREADY_OPTIMAL: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    (
        "cpu_attention",
        "attention",
        re.compile(
            r"^aten::(_scaled_dot_product_(flash|efficient|cudnn|fused)\w*|_flash_attention\w*"
            r"|_efficient_attention\w*|_cudnn_attention\w*)$"
        ),
    ),
    (
        "cpu_conv",
        "conv",
        re.compile(
            r"^aten::(_?convolution\w*|conv\w*d|conv_transpose\w*|mkldnn_convolution\w*|cudnn_convolution\w*"
            r"|miopen_convolution\w*|_?slow_conv\w*|thnn_conv\w*|_nnpack\w*|_mkldnn_conv\w*)$"
        ),
    ),
    (
        "cpu_gemm",
        "matmul",
        re.compile(
            r"^aten::(mm|addmm|addmm_|bmm|baddbmm|addbmm|addmv|mv|dot|vdot|_addmm_activation|_scaled_mm|_int_mm"
            r"|linear|matmul|mkldnn_linear\w*|_mkldnn\w*linear\w*|linear_backward|mkldnn_matmul|_mkl_linear)$"
        ),
    ),
)


def _strip_overload(name: str) -> str:
    return name.split(".", 1)[0] if name.startswith("aten::") else name


def explain_kernel(name: str, aten_op: str | None = None, *, tbe_already_optimal: bool = False) -> Classification:
    """Like :func:`classify_kernel` but also returns the rule that decided (for diagnostics and tests).

    ``tbe_already_optimal``: count FBGEMM table-batched-embedding kernels as already optimal (right when
    measuring headroom over a fused TorchRec stack) instead of addressable (right against eager PyTorch).
    """
    ctx_family = context_family(aten_op)
    stripped = (name or "").strip()

    if stripped.startswith("aten::"):
        op = _strip_overload(stripped)
        own_family = context_family(op)
        for rule, family, pattern in _CPU_ALREADY_OPTIMAL:
            if pattern.search(op):
                return Classification(ALREADY_OPTIMAL, ctx_family or family, rule)
        if own_family == "copy":
            return Classification(OVERHEAD, ctx_family or "copy", "cpu_copy")
        return Classification(ADDRESSABLE, ctx_family or own_family or "elementwise", "cpu_aten_op")

    for rule, bucket, family, kind, pattern in _NAME_RULES:
        if not pattern.search(stripped):
            continue
        if rule == "fbgemm_tbe" and tbe_already_optimal:
            bucket = ALREADY_OPTIMAL
        if kind == "helper" and ctx_family in _ALGORITHMIC_FAMILIES:
            bucket = ADDRESSABLE
        return Classification(bucket, ctx_family or family, rule)
    return Classification(UNCLASSIFIED, ctx_family, "none")


def classify_kernel(name: str, aten_op: str | None = None) -> tuple[str, str | None]:
    """Classify one kernel into ``(bucket, family)``.

    ``name`` is the kernel's demangled name as ``torch.profiler`` reports it (template arguments included), or an
    aten op name (``aten::addmm``) for CPU profiles. ``aten_op`` is the op that launched it: the outermost aten op
    of its CPU call chain, or a region label (``kbenv::interaction``, ``Optimizer.step#SGD.step``). The bucket
    comes from the name (the launching op only settles ambiguous helper kernels); the family comes from the
    launching op when it names one, else from the name. An unknown name returns ``("unclassified", family of
    the launching op or None)``.
    """
    c = explain_kernel(name, aten_op)
    return c.bucket, c.family
