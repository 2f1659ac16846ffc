#pragma once

#include "tilelang/passes/pass.h"

namespace tilelang::passes {

// Where the warpgroup waits for its wgmma gemms (sm_90a, after lower_kernel_cuda). A gemm whose
// accumulator is in the warpgroup layout is issued and committed as one wgmma group and left in
// flight (wgmma_async); the wait for it goes before the first later statement that reads or writes
// its accumulator or its A operand in registers (but a gemm reading that A: wgmma instructions in
// flight may share A registers), or writes one of its operands (a shared tile or fragment); the
// registers are pinned after the wait (wgmma_wait's arguments). It waits for as few
// groups as it can: wgmma_wait(n) with n the groups committed after the youngest one that statement
// needs (groups complete in commit order, so the older ones are complete too). Example (the FA3
// loop, frontend/pipeline_schedule.h): S = Q K^T; O += P V; the softmax reads S -> wait(1) there;
// the softmax writes P -> wait(0) there.
//
// Control flow: a condition whose branches commit groups commits empty groups in the branch with
// fewer when one of them leaves a group in flight (so the counts agree after it); a loop containing
// gemms starts with none in flight (waits for all before it) and waits for its own at the end of
// its body; so does a branch that holds such a loop. Releasing a bulk copy's stage
// (bulk_copy_release), code of the user's, and the end of the kernel or of a tile's scope wait
// for the groups they may concern; with several warpgroups, so does a barrier for the groups
// reading shared tiles (the others may write them past it). Gemms the pipeliner already overlaps (gemm_in_flight) keep
// their own waits.
ir::PrimFunc wgmma_waits(const ir::PrimFunc& func, const PassOptions& options);

}  // namespace tilelang::passes
