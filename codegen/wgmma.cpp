// Inline-PTX builders for wgmma (see wgmma.h). Each asm statement has side effects so LLVM keeps their order.
#include "codegen/wgmma.h"

#include <fmt/format.h>
#include <llvm/IR/InlineAsm.h>

namespace tilejit::codegen {
namespace {

void asm_void(Lowering &L, const char *text) {
  auto *fty = llvm::FunctionType::get(L.b.getVoidTy(), false);
  L.b.CreateCall(llvm::InlineAsm::get(fty, text, "~{memory}", /*hasSideEffects=*/true), {});
}

}  // namespace

void wgmma_fence(Lowering &L) { asm_void(L, "wgmma.fence.sync.aligned;"); }

void fence_proxy_async(Lowering &L) { asm_void(L, "fence.proxy.async.shared::cta;"); }

void wgmma_commit_and_wait(Lowering &L, std::vector<llvm::Value *> &regs) {
  wgmma_commit(L);
  wgmma_wait(L, 0);
  pin_registers(L, regs);
}

void wgmma_commit(Lowering &L) {
  asm_void(L, "wgmma.commit_group.sync.aligned;");
  ++L.wgmma_groups;
}

void wgmma_wait(Lowering &L, int pending) {
  if (pending < 0 || pending > 7) L.fail("internal: wgmma.wait_group count out of range");
  asm_void(L, fmt::format("wgmma.wait_group.sync.aligned {};", pending).c_str());
}

void pin_registers(Lowering &L, std::vector<llvm::Value *> &regs) {
  for (llvm::Value *&r : regs) {
    llvm::Type *t = r->getType();
    auto *fty = llvm::FunctionType::get(t, {t}, false);
    r = L.b.CreateCall(llvm::InlineAsm::get(fty, "", t->isFloatTy() ? "=f,0" : "=r,0", /*hasSideEffects=*/true), {r});
  }
}

llvm::Value *wgmma_descriptor(Lowering &L, llvm::Value *smem, int64_t lbo, int64_t sbo, int64_t row_bytes) {
  auto &b = L.b;
  uint64_t mode = row_bytes == 128 ? 1 : row_bytes == 64 ? 2 : row_bytes == 32 ? 3 : 0;
  if (!mode) L.fail("internal: wgmma operand rows must be 32, 64 or 128 bytes");
  // Both offsets are 14-bit fields counting 16 bytes.
  if (lbo < 0 || sbo < 0 || lbo % 16 || sbo % 16 || lbo >= (int64_t(1) << 18) || sbo >= (int64_t(1) << 18))
    L.fail(fmt::format("internal: a wgmma descriptor's byte offsets ({}, {}) must be multiples of 16 below 2^18", lbo, sbo));
  llvm::Value *addr = b.CreatePtrToInt(smem, b.getInt64Ty());
  llvm::Value *d = b.CreateLShr(b.CreateAnd(addr, b.getInt64(0x3FFFF)), 4);
  uint64_t fixed = (uint64_t((lbo >> 4) & 0x3FFF) << 16) | (uint64_t((sbo >> 4) & 0x3FFF) << 32) | (mode << 62);
  return b.CreateOr(d, b.getInt64(fixed));
}

namespace {

/// One wgmma.mma_async asm statement: acc (n/2 f32, tied in/out) then `a` (4 × b32 registers, or one i64
/// descriptor, M-major when trans_a), the B descriptor and scale-d.
std::vector<llvm::Value *> wgmma_call(Lowering &L, int n, bool bf16, const std::vector<llvm::Value *> &a,
                                      llvm::Value *b_desc, bool trans_b, const std::vector<llvm::Value *> &acc,
                                      bool accumulate, bool trans_a = false) {
  auto &b = L.b;
  int nacc = n / 2;
  if (int(acc.size()) != nacc) L.fail("internal: wgmma accumulator count does not match its shape");
  bool a_desc = a.size() == 1;
  std::string outs, ties, list;
  for (int i = 0; i < nacc; ++i) {
    outs += "=f,";
    ties += fmt::format("{},", i);
    list += fmt::format("{}${}", i ? ", " : "", i);
  }
  int a0 = 2 * nacc, dsc = a0 + int(a.size()), scale = dsc + 1;
  std::string a_text = a_desc ? fmt::format("${}", a0)
                              : fmt::format("{{${}, ${}, ${}, ${}}}", a0, a0 + 1, a0 + 2, a0 + 3);
  // Immediates: scale-a 1, scale-b 1, [transpose-a for a descriptor (0: K-major),] transpose-b.
  std::string imms = fmt::format("1, 1, {}{}", a_desc ? (trans_a ? "1, " : "0, ") : "", trans_b ? 1 : 0);
  std::string text = fmt::format(
      "{{\n.reg .pred p;\nsetp.ne.b32 p, ${}, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n{}k16.f32.{}.{} {{{}}}, {}, ${}, p, {};\n}}",
      scale, n, bf16 ? "bf16" : "f16", bf16 ? "bf16" : "f16", list, a_text, dsc, imms);
  std::string constraints = outs + ties + (a_desc ? "l," : "r,r,r,r,") + "l,r,~{memory}";
  std::vector<llvm::Type *> out_types(size_t(nacc), b.getFloatTy());
  auto *ret = llvm::StructType::get(L.ctx, out_types);
  std::vector<llvm::Type *> in_types(size_t(nacc), b.getFloatTy());
  std::vector<llvm::Value *> args(acc.begin(), acc.end());
  for (llvm::Value *r : a) {
    llvm::Type *t = a_desc ? b.getInt64Ty() : b.getInt32Ty();
    in_types.push_back(t);
    args.push_back(r->getType() == t ? r : b.CreateBitCast(r, t));
  }
  in_types.push_back(b.getInt64Ty());
  in_types.push_back(b.getInt32Ty());
  args.push_back(b_desc);
  args.push_back(L.i32(accumulate ? 1 : 0));
  auto *fty = llvm::FunctionType::get(ret, in_types, false);
  llvm::Value *r = b.CreateCall(llvm::InlineAsm::get(fty, text, constraints, /*hasSideEffects=*/true), args);
  std::vector<llvm::Value *> out;
  for (int i = 0; i < nacc; ++i) out.push_back(b.CreateExtractValue(r, {unsigned(i)}));
  return out;
}

}  // namespace

std::vector<llvm::Value *> wgmma_rs(Lowering &L, int n, bool bf16, const std::array<llvm::Value *, 4> &a,
                                    llvm::Value *desc, bool trans_b, const std::vector<llvm::Value *> &acc,
                                    bool accumulate) {
  return wgmma_call(L, n, bf16, {a.begin(), a.end()}, desc, trans_b, acc, accumulate);
}

std::vector<llvm::Value *> wgmma_ss(Lowering &L, int n, bool bf16, llvm::Value *a_desc, llvm::Value *b_desc,
                                    bool trans_b, const std::vector<llvm::Value *> &acc, bool accumulate,
                                    bool trans_a) {
  return wgmma_call(L, n, bf16, {a_desc}, b_desc, trans_b, acc, accumulate, trans_a);
}

}  // namespace tilejit::codegen
