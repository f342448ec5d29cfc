"""Golden kernel names -> buckets for kbenv.rewards.classify.

The H200 rows are the names measured with torch 2.11.0+cu130 / CUDA 13.0 / cuDNN 9.19 (template arguments
shortened where the measurement shortened them; the stems are verbatim). The A100-era rows are names from
public traces. When a torch / CUDA / GPU upgrade renames kernels, add the new names here with their intended
bucket: the profiler fails any profile whose unclassified share exceeds its budget.
"""

import pytest

from kbenv.rewards.classify import (
    BUCKETS,
    FAMILIES,
    classify_kernel,
    context_family,
    explain_kernel,
)

AO, ADD, OVH, UNC = "already_optimal", "addressable", "overhead", "unclassified"

# (kernel name, launching aten op or None, expected bucket, expected family)
GOLDEN_H200 = [
    # embedding_bag forward / backward (dense grad)
    ("void at::native::(anonymous namespace)::EmbeddingBag_updateOutputKernel_sum_mean<c10::BFloat16, long>(long const*, c10::BFloat16 const*, c10::BFloat16*, long*, long const*, long, long, long, long, long, c10::BFloat16 const*, long)", "aten::embedding_bag", ADD, "embedding"),
    ("void at::native::(anonymous namespace)::EmbeddingBag_updateOutputKernel_sum_mean<c10::BFloat16, long>(long const*)", None, ADD, "embedding"),
    ("void at::native::compute_grad_weight_bags<c10::BFloat16>(long const*, c10::BFloat16 const*)", "aten::_embedding_bag_backward", ADD, "embedding"),
    ("void at::native::compute_num_of_partial_segments<long>(long const*, long const*)", None, ADD, "embedding"),
    ("void at::native::krn_partial_segment_offset<long>(long*, long const*)", None, ADD, "embedding"),
    ("void at::native::krn_partials_per_segment<long>(long*, long const*)", None, ADD, "embedding"),
    ("void at::native::sum_and_scatter<c10::BFloat16, long>(long const*, c10::BFloat16*)", None, ADD, "embedding"),
    ("void at::native::compute_grad_weight<c10::BFloat16, long>(long const*, c10::BFloat16 const*)", "aten::embedding_dense_backward", ADD, "embedding"),
    # CUB helpers inside the embedding backward: part of the op's algorithm
    ("void at_cuda_detail::cub::DeviceRadixSortHistogramKernel<at_cuda_detail::cub::DeviceRadixSortPolicy<long, long, unsigned long>::Policy900, false, long, unsigned long, at_cuda_detail::cub::detail::identity_decomposer_t>(unsigned long*, long const*, unsigned long, int, int, at_cuda_detail::cub::detail::identity_decomposer_t)", "aten::embedding_bag", ADD, "embedding"),
    ("void at_cuda_detail::cub::DeviceRadixSortExclusiveSumKernel<at_cuda_detail::cub::DeviceRadixSortPolicy<long, long, unsigned long>::Policy900, unsigned long>(unsigned long*)", "aten::embedding_bag", ADD, "embedding"),
    ("void at_cuda_detail::cub::DeviceRadixSortOnesweepKernel<at_cuda_detail::cub::DeviceRadixSortPolicy<long, long, unsigned long>::Policy900, false, long, long, unsigned long, int, int>(int*, int*)", "aten::embedding_bag", ADD, "embedding"),
    ("void at_cuda_detail::cub::DeviceScanInitKernel<at_cuda_detail::cub::ScanTileState<long, true> >(at_cuda_detail::cub::ScanTileState<long, true>, int)", "aten::embedding_bag", ADD, "embedding"),
    ("void at_cuda_detail::cub::DeviceScanKernel<at_cuda_detail::cub::DeviceScanPolicy<long, at::native::ReduceAdd>::Policy900, long const*, long*>(long const*, long*)", "aten::embedding_bag", ADD, "embedding"),
    ("void at_cuda_detail::cub::DeviceUniqueByKeySweepKernel<at_cuda_detail::cub::detail::unique_by_key::policy_hub<long, long>::Policy900, long const*>(long const*)", "aten::embedding_bag", ADD, "embedding"),
    ("void at_cuda_detail::cub::DeviceCompactInitKernel<at_cuda_detail::cub::ScanTileState<int, true>, int*>(at_cuda_detail::cub::ScanTileState<int, true>, int, int*)", "aten::embedding_bag", ADD, "embedding"),
    ("void at::native::elementwise_kernel_with_index<int, at::native::arange_cuda_out(c10::Scalar const&, c10::Scalar const&, c10::Scalar const&, at::Tensor&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(long)#1}>(int, at::native::arange_cuda_out)", "aten::embedding_bag", ADD, "embedding"),
    ("Memset (Device)", "aten::embedding_bag", OVH, "embedding"),
    # gather / scatter / index
    ("void at::native::vectorized_gather_kernel<16, long>(char*, char*, long*, int, long, long, long, long, bool)", None, ADD, "gather_scatter"),
    ("void at::native::vectorized_gather_kernel<16, long>(char*, char*, long*, int, long, long, long, long, bool)", "aten::embedding", ADD, "embedding"),
    ("void at::native::_scatter_gather_elementwise_kernel<128, 8, at::native::_cuda_scatter_gather_internal_kernel<false, c10::BFloat16>::operator()<long, at::native::TensorAssign>(at::TensorIterator&, long, long, long, at::native::TensorAssign const&)::{lambda(int)#1}>(int, at::native::_cuda_scatter_gather_internal_kernel)", "aten::gather", ADD, "gather_scatter"),
    ("void at::native::_scatter_gather_elementwise_kernel<128, 8, at::native::_cuda_scatter_gather_internal_kernel<true, c10::BFloat16>::operator()<long, at::native::ReduceAdd>(at::TensorIterator&, long, long, long, at::native::ReduceAdd const&)::{lambda(int)#1}>(int)", "aten::scatter_add_", ADD, "gather_scatter"),
    ("void at::native::indexFuncLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true, at::native::ReduceAdd>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>)", "aten::index_add_", ADD, "gather_scatter"),
    ("void at::native::(anonymous namespace)::indexing_backward_kernel<c10::BFloat16, 4>(long const*, long const*, c10::BFloat16 const*, c10::BFloat16*, long, long, long, long, bool)", "aten::index_put_", ADD, "gather_scatter"),
    ("void at::native::_assert_async_cuda_kernel<bool>(bool const*, at::native::Msg)", "aten::index_put_", ADD, "gather_scatter"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<long, at::native::func_wrapper_t<long, at::native::MinNanFunctor<long> >, unsigned int, long, 4, 4> >(at::native::ReduceOp<long>)", "aten::index_put_", ADD, "gather_scatter"),
    # normalisation / softmax
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, false>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)", "aten::layer_norm", ADD, "normalization"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, true>(int, float)", "aten::rms_norm", ADD, "normalization"),
    ("void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float, false>(c10::BFloat16 const*)", None, ADD, "normalization"),
    ("void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 7, false, false>(c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, int, bool)", "aten::softmax", ADD, "softmax"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)", "aten::softmax", ADD, "softmax"),
    ("void at::native::batch_norm_collect_statistics_kernel<at::native::Var, c10::BFloat16, float, float, int>(at::GenericPackedTensorAccessor<c10::BFloat16 const, 3ul, at::RestrictPtrTraits, int>)", "aten::batch_norm", ADD, "normalization"),
    ("void at::native::batch_norm_transform_input_kernel<c10::BFloat16, float, float, true, int>(at::GenericPackedTensorAccessor<c10::BFloat16 const, 3ul, at::RestrictPtrTraits, int>)", "aten::batch_norm", ADD, "normalization"),
    ("void at::native::batch_norm_backward_kernel<c10::BFloat16, float, float, int>(at::GenericPackedTensorAccessor<c10::BFloat16 const, 3ul, at::RestrictPtrTraits, int>)", "aten::native_batch_norm_backward", ADD, "normalization"),
    ("void at::native::unrolled_elementwise_kernel_for_multi_outputs<3, at::native::batch_norm_update_stats_and_invert(at::Tensor const&, at::Tensor const&, at::Tensor const&, at::Tensor const&, double, long)::{lambda()#1}::operator()() const::{lambda(float, float, float, float)#1}, std::array<char*, 7ul>, 4>(int)", None, ADD, "normalization"),
    # top-k
    ("void at::native::mbtopk::fill<unsigned int, unsigned int>(unsigned int*, unsigned int, unsigned int)", "aten::topk", ADD, "topk"),
    ("void at::native::mbtopk::computeBlockDigitCounts<float, unsigned int, unsigned int, 2>(at::cuda::detail::TensorInfo<float const, unsigned int>)", "aten::topk", ADD, "topk"),
    ("void at::native::mbtopk::computeDigitCumSum<float, unsigned int, unsigned int>(short*, unsigned int*, unsigned int)", "aten::topk", ADD, "topk"),
    ("void at::native::mbtopk::computeBlockwiseKthCounts<unsigned int>(unsigned int*, short*, unsigned int, unsigned int, unsigned int*)", "aten::topk", ADD, "topk"),
    ("void at::native::mbtopk::computeBlockwiseWithinKCounts<unsigned int>(unsigned int*, short*, unsigned int, unsigned int, bool, unsigned int*)", "aten::topk", ADD, "topk"),
    ("void at::native::mbtopk::gatherTopK<float, unsigned int, 2>(at::cuda::detail::TensorInfo<float const, unsigned int>)", "aten::topk", ADD, "topk"),
    ("void at_cuda_detail::cub::DeviceScanByKeyKernel<at_cuda_detail::cub::DeviceScanByKeyPolicy<unsigned int*, unsigned int*>::Policy900>(unsigned int*)", "aten::topk", ADD, "topk"),
    ("void at::native::radixSortKVInPlace<2, -1, 32, 4, float, long, unsigned int>(at::cuda::detail::TensorInfo<float, unsigned int>)", "aten::topk", ADD, "topk"),
    ("void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(at::cuda::detail::TensorInfo<float const, unsigned int>)", "aten::topk", ADD, "topk"),
    ("void at::native::bitonicSortKVInPlace<2, -1, 16, 16, float, long, at::native::LTOp<float, true>, unsigned int>(at::cuda::detail::TensorInfo<float, unsigned int>)", "aten::topk", ADD, "topk"),
    # elementwise, casts, reductions, cat
    ("void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)", "aten::add", ADD, "elementwise"),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int)", "aten::mul", ADD, "elementwise"),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::sigmoid_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#3}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int)", "aten::sigmoid", ADD, "elementwise"),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#14}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int)", "aten::relu", ADD, "elementwise"),
    ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast)", "aten::contiguous", OVH, "copy"),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int)", "aten::to", OVH, "copy"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<float, at::native::sum_functor<c10::BFloat16, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, 4, 4> >(at::native::ReduceOp<c10::BFloat16>)", "aten::sum", ADD, "reduction"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<c10::BFloat16, at::native::MaxNanFunctor<float> >, unsigned int, c10::BFloat16, 4, 4> >(at::native::ReduceOp<c10::BFloat16>)", "aten::amax", ADD, "reduction"),
    ("void at::native::reduce_kernel<128, 4, at::native::ReduceOp<c10::BFloat16, at::native::MeanOps<float, float, float, float>, unsigned int, c10::BFloat16, 4, 4> >(at::native::ReduceOp<c10::BFloat16>)", "aten::mean", ADD, "reduction"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy_vectorized<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 2, 128, 1, 16, 8>(char*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)", "aten::cat", OVH, "copy"),
    # GEMMs: cuBLAS nvjet / xmma, CUTLASS dispatched by cuBLAS
    ("nvjet_sm90_tst_64x64_64x13_2x1_v_bz_bias_TNT", "aten::linear", AO, "matmul"),
    ("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT", "aten::mm", AO, "matmul"),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas", "aten::mm", AO, "matmul"),
    ("void cutlass::Kernel2<cutlass_75_wmma_tensorop_bf16_s161616gemm_bf16_32x32_32x1_tn_align1>(cutlass_75_wmma_tensorop_bf16_s161616gemm_bf16_32x32_32x1_tn_align1::Params)", "aten::bmm", AO, "matmul"),
    ("void cutlass::Kernel2<cutlass_75_wmma_tensorop_bf16_s161616gemm_bf16_32x32_32x1_tn_align1>(cutlass_75_wmma_tensorop_bf16_s161616gemm_bf16_32x32_32x1_tn_align1::Params)", "kbenv::interaction", AO, "interaction"),
    # cuDNN convolution (fprop, dgrad, wgrad) and its layout transforms / workspace init
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cudnn", "aten::conv2d", AO, "conv"),
    ("sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cudnn", "aten::convolution_backward", AO, "conv"),
    ("sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_on_kernel__5x_cudnn", "aten::convolution_backward", AO, "conv"),
    ("void cask_plugin__5x_cudnn::xmma__5x_cudnn::init_device_workspace_kernel<false>(cask_plugin__5x_cudnn::xmma__5x_cudnn::Init_device_workspace_params)", "aten::conv2d", OVH, "conv"),
    ("void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16, __nv_bfloat16, float, false, true, (cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nchw2nhwc_params_t<float>, __nv_bfloat16 const*, __nv_bfloat16*)", "aten::conv2d", OVH, "conv"),
    ("void cudnn::engines_precompiled::nhwcToNchwKernel<__nv_bfloat16, __nv_bfloat16, float, true, false, (cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nhwc2nchw_params_t<float>)", "aten::conv2d", OVH, "conv"),
    # attention: cuDNN (default on H200), flash, memory-efficient
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0", "aten::scaled_dot_product_attention", AO, "attention"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, false, true, false, false>(pytorch_flash::Flash_fwd_params)", "aten::scaled_dot_product_attention", AO, "attention"),
    ("fmha_cutlassF_bf16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, cutlass::arch::Sm80, true, 64, 128, 128, true, true>::Params)", "aten::scaled_dot_product_attention", AO, "attention"),
    # Inductor, host copies, memset
    ("triton_per_fused_mul_relu_sum_0", None, ADD, "reduction"),
    ("Memcpy HtoD (Pageable -> Device)", None, OVH, "copy"),
    ("Memset (Device)", None, OVH, "copy"),
]

GOLDEN_OTHER = [
    # A100-era cuBLAS / CUTLASS / cuDNN names and other public-trace names
    ("ampere_bf16_s1688gemm_bf16_128x128_ldg8_f2f_stages_32x1_nn", "aten::addmm", AO, "matmul"),
    ("ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_32x3_nn", None, AO, "matmul"),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x64x8_stage3_warpsize2x2x1_ffma", None, AO, "matmul"),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>(cutlass_80_simt_sgemm_128x256_8x4_nt_align1::Params)", None, AO, "matmul"),
    ("cutlass_80_tensorop_s1688gemm_bf16_128x128_32x3_nn_align8", None, AO, "matmul"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_32x1_tn_align8>(Params)", None, AO, "matmul"),
    ("nvjet_hsh_192x192_64x3_2x1_v_bz_coopB_NTN", None, AO, "matmul"),
    ("void sgemm_largek_lds64<true, false, 5, 5, 4, 4, 4, 34>(float*, float const*, float const*, int, int, int)", "aten::linear", AO, "matmul"),
    ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, float, float, false, true>(cublasGemvParamsEx)", None, AO, "matmul"),
    ("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 2, 2, false, false, cublasGemvParamsEx<int> >(cublasGemvParamsEx<int>)", None, AO, "matmul"),
    ("void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8>(Params)", "aten::conv2d", AO, "conv"),
    ("void cudnn::cnn::reduce_wgrad_nchw_helper<float, __nv_bfloat16>(void*, void const*, float, int, int)", "aten::conv2d", AO, "conv"),
    ("void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(void const*, void const*, void*)", None, AO, "attention"),
    ("void cudnn::fusion::convert_dq_to_16bits<true>(void const*, void*, unsigned int)", None, AO, "attention"),
    ("void (anonymous namespace)::indexing_backward_kernel_stride_1<float>(long const*, long const*, float const*, float*, long)", "kbenv::interaction", ADD, "interaction"),
    ("void at::native::indexFuncLargeIndex<float, long, unsigned int, 2, 2, -2, true, at::native::(anonymous namespace)::ReduceAdd>(Info)", "Optimizer.step#SGD.step", ADD, "optimizer"),
    ("void at::native::lpnorm_cleanup<c10::BFloat16, (at::native::NormType)1, c10::BFloat16, true, float>(float const*)", "kbenv::optimizer", ADD, "optimizer"),
    ("void (anonymous namespace)::elementwise_kernel_with_index<int, at::native::arange_cuda_out(c10::Scalar const&)::{lambda()#1}>(int)", None, OVH, "copy"),
    ("nvjet_tst_64x24_64x16_4x1_v_bz_splitK_TNT", None, AO, "matmul"),
    ("void gemv2N_kernel<int, int, float, float, float, float, 128, 2, 4, 4, false, false, cublasGemvParams<cublasGemvTensorStrided<float const>, cublasGemvTensorStrided<float const>, cublasGemvTensorStrided<float>, float> >(cublasGemvParams)", None, AO, "matmul"),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, false, false>(cublasLt::cublasSplitKParams<float>)", None, AO, "matmul"),
    ("maxwell_scudnn_winograd_128x128_ldg1_ldg4_relu_tile418n_nt", None, AO, "conv"),
    ("void cudnn::detail::implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>(int, int, int, float const*)", None, AO, "conv"),
    ("void cudnn::detail::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(cudnnTensorStruct, float const*)", None, ADD, "normalization"),
    ("void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(cudnnTensorStruct)", None, ADD, "normalization"),
    ("void cudnn::detail::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float, float)", None, ADD, "normalization"),
    ("void cudnn::detail::cubeTransposeDeviceGeneric_kernel<float>(float const*)", None, OVH, "copy"),
    ("void op_tensor_kernel<2, float, float, float, 128, 1, 1, 4, (cudnnOpTensorOp_t)0>(cudnnTensorStruct, float*)", None, ADD, "elementwise"),
    ("flash_bwd_dot_do_o_kernel", None, AO, "attention"),
    ("void flash_bwd_convert_dq_kernel<Flash_bwd_kernel_traits<64, 128, 128, 8, 4, 2, 2, false, false, cutlass::half_t> >(Flash_bwd_params)", None, AO, "attention"),
    ("flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel", None, AO, "attention"),
    ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> > > > > >(Params)", None, AO, "attention"),
    ("fmha_cutlassB_bf16_aligned_64x64_k128_sm80(PyTorchMemEffAttention::AttentionBackwardKernel<cutlass::arch::Sm80, cutlass::bfloat16_t, true, false, true, 64, 64, 128, false>::Params)", None, AO, "attention"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", None, AO, "copy"),
    ("void at::native::(anonymous namespace)::indexSelectLargeIndex<float, long, unsigned int, 2, 2, -2>(at::cuda::detail::TensorInfo<float, unsigned int>)", None, ADD, "gather_scatter"),
    ("void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<at::native::index_kernel_impl<at::native::OpaqueType<4> >(at::TensorIteratorBase&)::{lambda(char*, char const*, long)#1}>(at::TensorIteratorBase&)::{lambda(int)#1}>(long, at::native::gpu_index_kernel)", None, ADD, "gather_scatter"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<3>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 3, (at::native::ADAM_MODE)1, false>, float*, double, double, double, double, double, bool, float*, float*>(at::native::(anonymous namespace)::TensorListMetadata<3>)", "Optimizer.step#AdamW.step", ADD, "optimizer"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<2>)", None, ADD, "optimizer"),
    ("split_embedding_codegen_forward_unweighted_kernel", None, ADD, "embedding"),
    ("triton_poi_fused_add_relu_0", None, ADD, "elementwise"),
    ("triton_tem_fused_mm_0", None, AO, "matmul"),
    ("void at::native::(anonymous namespace)::max_pool_forward_nchw<c10::BFloat16, float>(int, c10::BFloat16 const*, long, long)", "aten::max_pool2d", ADD, "pooling"),
    ("void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, float*, float const*)", "aten::cross_entropy_loss", ADD, "loss"),
]

UNKNOWN_NAMES = ["fusion_201", "my_custom_kernel", "kernel_0", "", "xyzzy<int>(int)"]


@pytest.mark.parametrize("name,aten_op,bucket,family", GOLDEN_H200, ids=[f"h200-{i}" for i in range(len(GOLDEN_H200))])
def test_golden_h200_names(name, aten_op, bucket, family):
    c = explain_kernel(name, aten_op)
    assert (c.bucket, c.family) == (bucket, family), f"{name[:80]} -> {c}"


@pytest.mark.parametrize("name,aten_op,bucket,family", GOLDEN_OTHER, ids=[f"other-{i}" for i in range(len(GOLDEN_OTHER))])
def test_golden_other_names(name, aten_op, bucket, family):
    c = explain_kernel(name, aten_op)
    assert (c.bucket, c.family) == (bucket, family), f"{name[:80]} -> {c}"


@pytest.mark.parametrize("name", UNKNOWN_NAMES)
def test_unknown_names_are_unclassified(name):
    assert classify_kernel(name) == ("unclassified", None)
    # the launching op gives a family, never a bucket
    assert classify_kernel(name, "aten::embedding_bag") == ("unclassified", "embedding")


def test_outputs_stay_in_the_vocabulary():
    for name, aten_op, _, _ in GOLDEN_H200 + GOLDEN_OTHER:
        bucket, family = classify_kernel(name, aten_op)
        assert bucket in BUCKETS
        assert family in FAMILIES


def test_helpers_depend_on_the_launching_op():
    arange = "void at::native::elementwise_kernel_with_index<int, at::native::arange_cuda_out(...)::{lambda(long)#1}>(int)"
    sort = "void at_cuda_detail::cub::DeviceRadixSortOnesweepKernel<Policy900, false, long, long>(int*)"
    assert classify_kernel(arange) == ("overhead", "copy")
    assert classify_kernel(arange, "aten::embedding_dense_backward") == ("addressable", "embedding")
    assert classify_kernel(arange, "aten::index_put_") == ("addressable", "gather_scatter")
    assert classify_kernel(sort, "aten::sort") == ("addressable", "topk")
    assert classify_kernel(sort, "aten::embedding_bag")[0] == "addressable"
    assert classify_kernel("void at::native::_assert_async_cuda_kernel<bool>(bool const*)") == ("overhead", "copy")


def test_vendor_kernels_keep_their_bucket_whatever_launches_them():
    gemm = "nvjet_sm90_tst_64x64_64x13_2x1_v_bz_bias_TNT"
    for op in ("aten::linear", "kbenv::interaction", "aten::embedding_bag", None):
        assert classify_kernel(gemm, op)[0] == "already_optimal"


def test_tbe_flag():
    name = "split_embedding_backward_codegen_sgd_unweighted_kernel_warp_per_row_1"
    assert explain_kernel(name).bucket == "addressable"
    assert explain_kernel(name, tbe_already_optimal=True).bucket == "already_optimal"


@pytest.mark.parametrize(
    "op,family",
    [
        ("kbenv::interaction", "interaction"),
        ("kbenv::optimizer", "optimizer"),
        ("kbenv::not_a_family", None),
        ("Optimizer.step#SGD.step", "optimizer"),
        ("Optimizer.zero_grad#AdamW.zero_grad", "optimizer"),
        ("aten::_foreach_add_", "optimizer"),
        ("aten::_fused_adamw_", "optimizer"),
        ("aten::scaled_dot_product_attention", "attention"),
        ("aten::_scaled_dot_product_cudnn_attention_backward", "attention"),
        ("aten::conv2d", "conv"),
        ("aten::convolution_backward", "conv"),
        ("aten::linear", "matmul"),
        ("aten::bmm", "matmul"),
        ("aten::embedding_bag", "embedding"),
        ("aten::_embedding_bag_backward", "embedding"),
        ("aten::embedding_dense_backward", "embedding"),
        ("aten::batch_norm", "normalization"),
        ("aten::native_batch_norm_backward", "normalization"),
        ("aten::layer_norm", "normalization"),
        ("aten::cross_entropy_loss", "loss"),
        ("aten::binary_cross_entropy", "loss"),
        ("aten::nll_loss_backward", "loss"),
        ("aten::_log_softmax", "softmax"),
        ("aten::max_pool2d", "pooling"),
        ("aten::adaptive_avg_pool2d", "pooling"),
        ("aten::topk", "topk"),
        ("aten::cumsum", "scan"),
        ("aten::index", "gather_scatter"),
        ("aten::index_put_", "gather_scatter"),
        ("aten::gather", "gather_scatter"),
        ("aten::sum", "reduction"),
        ("aten::cat", "copy"),
        ("aten::to", "copy"),
        ("aten::add.Tensor", None),
        ("aten::relu", None),
        (None, None),
        ("ProfilerStep#3", None),
    ],
)
def test_context_family(op, family):
    assert context_family(op) == family


@pytest.mark.parametrize(
    "name,ctx,bucket,family",
    [
        ("aten::addmm", "aten::linear", AO, "matmul"),
        ("aten::mm", None, AO, "matmul"),
        ("aten::bmm", "kbenv::interaction", AO, "interaction"),
        ("aten::mkldnn_convolution", "aten::conv2d", AO, "conv"),
        ("aten::convolution_backward", None, AO, "conv"),
        ("aten::_scaled_dot_product_flash_attention_for_cpu", "aten::scaled_dot_product_attention", AO, "attention"),
        ("aten::native_layer_norm", "aten::layer_norm", ADD, "normalization"),
        ("aten::_embedding_bag", "aten::embedding_bag", ADD, "embedding"),
        ("aten::add_", "Optimizer.step#SGD.step", ADD, "optimizer"),
        ("aten::gelu", None, ADD, "elementwise"),
        ("aten::copy_", "aten::to", OVH, "copy"),
        ("aten::empty", "aten::embedding_bag", OVH, "embedding"),
        ("aten::cat", None, OVH, "copy"),
    ],
)
def test_cpu_aten_names(name, ctx, bucket, family):
    assert classify_kernel(name, ctx) == (bucket, family)
