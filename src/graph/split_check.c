/* A splitting op runs eagerly between replayed pieces, so it must write
 * into a buffer the piece before it allocated. If its
 * subgraph instead returns a value that a later node reads, that value was
 * allocated outside any graph: at replay the next piece would read the
 * address it saw at capture, which no longer holds this step's result.
 * This check finds that pattern in a split graph before anything runs. */
#include "internal.h"

pw_status pw_check_split_for_replay(const pw_ir *split) {
    if (!split) return pw_error(PW_ERR_INVALID_ARG, "split check: graph is NULL");
    for (int i = 0; i < pw_ir_num_nodes(split); i++) {
        if (pw_ir_node_kind_of(split, i) != PW_IR_CALL_MODULE) continue;
        const char *target = pw_ir_node_target(split, i);
        const pw_ir *sub = pw_ir_find_subgraph(split, target);
        if (!sub || !pw_ir_is_splitting(sub)) continue;
        for (int u = 0; u < pw_ir_node_num_users(split, i); u++) {
            int user = pw_ir_node_user(split, i, u);
            if (pw_ir_node_kind_of(split, user) == PW_IR_OUTPUT) continue;
            /* a getitem of the result counts through its own users */
            int reader = user;
            if (pw_ir_node_kind_of(split, user) == PW_IR_GETITEM) {
                if (pw_ir_node_num_users(split, user) == 0) continue;
                reader = pw_ir_node_user(split, user, 0);
            }
            const char *op = "?";
            for (int k = 0; k < pw_ir_num_nodes(sub); k++)
                if (pw_ir_node_kind_of(sub, k) == PW_IR_CALL_FUNCTION) {
                    op = pw_ir_node_target(sub, k);
                    break;
                }
            return pw_error(PW_ERR_UNSUPPORTED,
                            "splitting subgraph '%s' (op '%s') returns a value that '%s' reads: "
                            "a splitting op must write into an output buffer allocated by the "
                            "piece before it, or replayed pieces would read a stale address",
                            target, op, pw_ir_node_name(split, reader));
        }
    }
    return PW_OK;
}
