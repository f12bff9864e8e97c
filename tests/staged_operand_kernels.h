// Tile-IR kernels whose loops read loop-invariant dot operands (codegen/stage_operands.h), as text: shared by the
// CPU tests of the plan's staging and the GPU tests that run each plan against the interpreter.
#pragma once

namespace tilejit::testing {

/// acc += a·b0 + a·b(i) over n iterations of 128x128 bf16 wgmma-sized dots: a and b0 loop-invariant (32 KB each:
/// on sm_90a with 2 stages, a in a static array and b0 in the dynamic buffer past the stage buffers of b(i), which
/// the pipeline copies ahead). Arguments: a, b (n blocks of 128x128), c (f32 [128, 128]), n.
inline const char *const kInvariantDotsKernel = R"(tt.func @invariant(%a: ptr<bf16> {align16}, %b: ptr<bf16> {align16}, %c: ptr<f32> {align16}, %n: i32) {
  %0 = arange {start = 0, end = 128} : tensor<128xi32>
  %1 = constant {value = 128} : tensor<128xi32>
  %2 = mul %0, %1 : tensor<128xi32>
  %3 = expand_dims %2 {axis = 1} : tensor<128x1xi32>
  %4 = broadcast %3 : tensor<128x128xi32>
  %5 = expand_dims %0 {axis = 0} : tensor<1x128xi32>
  %6 = broadcast %5 : tensor<128x128xi32>
  %7 = add %4, %6 : tensor<128x128xi32>
  %8 = splat %a : tensor<128x128xptr<bf16>>
  %9 = ptr_add %8, %7 : tensor<128x128xptr<bf16>>
  %10 = load %9 : tensor<128x128xbf16>
  %11 = splat %b : tensor<128x128xptr<bf16>>
  %12 = ptr_add %11, %7 : tensor<128x128xptr<bf16>>
  %13 = load %12 : tensor<128x128xbf16>
  %14 = constant {value = 0} : tensor<128x128xf32>
  %15 = constant {value = 0} : i32
  %16 = constant {value = 1} : i32
  %17 = for %18 = %15 to %n step %16 iter_args(%19 = %14) -> (tensor<128x128xf32>) {
    %20 = constant {value = 16384} : i32
    %21 = mul %18, %20 : i32
    %22 = splat %21 : tensor<128x128xi32>
    %23 = add %7, %22 : tensor<128x128xi32>
    %24 = ptr_add %11, %23 : tensor<128x128xptr<bf16>>
    %25 = load %24 : tensor<128x128xbf16>
    %26 = dot %10, %13, %19 : tensor<128x128xf32>
    %27 = dot %10, %25, %26 : tensor<128x128xf32>
    yield %27
  }
  %28 = splat %c : tensor<128x128xptr<f32>>
  %29 = ptr_add %28, %7 : tensor<128x128xptr<f32>>
  store %29, %17 : tensor<128x128xf32>
})";

/// A bf16 [64, 64] operand read in one loop by an FMA dot (N = 2: no tensor-core layout) and by a tensor-core dot:
/// each reads it staged in its own family's form. Arguments: a (bf16, at least 64x64), c (f32: the
/// 64x64 result, then the 64x2 one at element 4096, rows 64 elements apart), n.
inline const char *const kMixedFamiliesKernel = R"(tt.func @mix(%a: ptr<bf16> {align16}, %c: ptr<f32> {align16}, %n: i32) {
  %0 = arange {start = 0, end = 64} : tensor<64xi32>
  %1 = constant {value = 64} : tensor<64xi32>
  %2 = mul %0, %1 : tensor<64xi32>
  %3 = expand_dims %2 {axis = 1} : tensor<64x1xi32>
  %4 = broadcast %3 : tensor<64x64xi32>
  %5 = expand_dims %0 {axis = 0} : tensor<1x64xi32>
  %6 = broadcast %5 : tensor<64x64xi32>
  %7 = add %4, %6 : tensor<64x64xi32>
  %8 = splat %a : tensor<64x64xptr<bf16>>
  %9 = ptr_add %8, %7 : tensor<64x64xptr<bf16>>
  %10 = load %9 : tensor<64x64xbf16>
  %20 = arange {start = 0, end = 2} : tensor<2xi32>
  %21 = expand_dims %20 {axis = 0} : tensor<1x2xi32>
  %22 = broadcast %21 : tensor<64x2xi32>
  %23 = expand_dims %2 {axis = 1} : tensor<64x1xi32>
  %24 = broadcast %23 : tensor<64x2xi32>
  %25 = add %24, %22 : tensor<64x2xi32>
  %26 = splat %a : tensor<64x2xptr<bf16>>
  %27 = ptr_add %26, %25 : tensor<64x2xptr<bf16>>
  %28 = load %27 : tensor<64x2xbf16>
  %14 = constant {value = 0} : tensor<64x64xf32>
  %30 = constant {value = 0} : tensor<64x2xf32>
  %15 = constant {value = 0} : i32
  %16 = constant {value = 1} : i32
  %17:2 = for %18 = %15 to %n step %16 iter_args(%19 = %14, %31 = %30) -> (tensor<64x64xf32>, tensor<64x2xf32>) {
    %32 = dot %10, %28, %31 : tensor<64x2xf32>
    %33 = dot %10, %10, %19 : tensor<64x64xf32>
    yield %33, %32
  }
  %40 = splat %c : tensor<64x64xptr<f32>>
  %41 = ptr_add %40, %7 : tensor<64x64xptr<f32>>
  store %41, %17#0 : tensor<64x64xf32>
  %42 = splat %c : tensor<64x2xptr<f32>>
  %44 = constant {value = 4096} : tensor<64x2xi32>
  %45 = add %25, %44 : tensor<64x2xi32>
  %43 = ptr_add %42, %45 : tensor<64x2xptr<f32>>
  store %43, %17#1 : tensor<64x2xf32>
}
)";

/// An outer loop's carried f32 [32, 32] tile read by an FMA dot in an inner loop: staged before the inner loop
/// though no text can mark a region argument. Arguments: a (f32 32x32), c (f32 32x32), n.
inline const char *const kCarriedOperandKernel = R"(tt.func @carried(%a: ptr<f32> {align16}, %c: ptr<f32> {align16}, %n: i32) {
  %0 = arange {start = 0, end = 32} : tensor<32xi32>
  %1 = constant {value = 32} : tensor<32xi32>
  %2 = mul %0, %1 : tensor<32xi32>
  %3 = expand_dims %2 {axis = 1} : tensor<32x1xi32>
  %4 = broadcast %3 : tensor<32x32xi32>
  %5 = expand_dims %0 {axis = 0} : tensor<1x32xi32>
  %6 = broadcast %5 : tensor<32x32xi32>
  %7 = add %4, %6 : tensor<32x32xi32>
  %8 = splat %a : tensor<32x32xptr<f32>>
  %9 = ptr_add %8, %7 : tensor<32x32xptr<f32>>
  %10 = load %9 : tensor<32x32xf32>
  %14 = constant {value = 0} : tensor<32x32xf32>
  %15 = constant {value = 0} : i32
  %16 = constant {value = 1} : i32
  %17 = for %18 = %15 to %n step %16 iter_args(%19 = %10) -> (tensor<32x32xf32>) {
    %20 = for %21 = %15 to %n step %16 iter_args(%22 = %14) -> (tensor<32x32xf32>) {
      %23 = dot %19, %10, %22 : tensor<32x32xf32>
      yield %23
    }
    yield %20
  }
  %28 = splat %c : tensor<32x32xptr<f32>>
  %29 = ptr_add %28, %7 : tensor<32x32xptr<f32>>
  store %29, %17 : tensor<32x32xf32>
}
)";

}  // namespace tilejit::testing
