/* Disassembly of a plan (pw_plan_print, `piecewise compile --emit plan`):
 * one instruction per line with the node it comes from. */
#include "plan_internal.h"

static void print_opnd(pw_sb *sb, uint32_t w) {
    static const char prefix[] = {'r', 'p', 'k', '?'};
    pw_sb_printf(sb, "%s%c%u", (w & PW_OPND_MOVE) ? "move " : "", prefix[PW_OPND_SPACE(w)], PW_OPND_INDEX(w));
}

static void print_opnds(pw_sb *sb, const pw_plan *p, const pw_instr *in) {
    pw_sb_puts(sb, "(");
    for (int j = 0; j < in->n; j++) {
        if (j) pw_sb_puts(sb, ", ");
        print_opnd(sb, p->opnds[in->c + j]);
    }
    pw_sb_puts(sb, ")");
}

pw_status pw_plan_print(const pw_plan *p, char **out) {
    pw_sb sb = {0};
    int ninl = 0;
    for (int i = 0; i < p->nsubmods; i++) ninl += p->submod_inlined[i];
    pw_sb_printf(&sb, "; plan %s: %d params, %d constants, %d ops, %d submodules (%d inlined), "
                 "%d registers, %d instructions\n", p->graph_name, p->nparams, p->nconsts, p->nfns,
                 p->nsubmods, ninl, p->ntemps, p->ncode);
    for (int i = 0; i < p->nparams; i++) pw_sb_printf(&sb, "; p%d = %%%s\n", i, p->param_names[i]);
    for (int i = 0; i < p->nconsts; i++) pw_sb_printf(&sb, "; k%d = %s\n", i, p->const_text[i]);
    for (int i = 0; i < p->nfns; i++) pw_sb_printf(&sb, "; fn%d = %s\n", i, p->fn_targets[i]);
    for (int i = 0; i < p->nsubmods; i++)
        pw_sb_printf(&sb, "; sub%d = %s%s\n", i, p->submod_names[i], p->submod_inlined[i] ? " (inlined)" : "");
    for (int pc = 0; pc < p->ncode; pc++) {
        const pw_instr *in = &p->code[pc];
        size_t start = sb.len;
        pw_sb_printf(&sb, "%5d  ", pc);
        switch ((pw_instr_op)in->op) {
        case PW_INSTR_CALL:
            pw_sb_printf(&sb, "CALL     r%u := fn%u", in->a, in->b);
            print_opnds(&sb, p, in);
            break;
        case PW_INSTR_CALLSUB:
            pw_sb_printf(&sb, "CALLSUB  r%u := sub%u", in->a, in->b);
            print_opnds(&sb, p, in);
            break;
        case PW_INSTR_GETITEM:
            pw_sb_printf(&sb, "GETITEM  r%u := ", in->a);
            print_opnd(&sb, in->b);
            pw_sb_printf(&sb, "[%d]", (int32_t)in->c);
            break;
        case PW_INSTR_TUPLE:
            pw_sb_printf(&sb, "TUPLE    r%u := ", in->a);
            print_opnds(&sb, p, in);
            break;
        case PW_INSTR_FREE: pw_sb_printf(&sb, "FREE     r%u", in->a); break;
        case PW_INSTR_RETURN:
            pw_sb_puts(&sb, "RETURN   ");
            print_opnd(&sb, in->b);
            break;
        default: pw_sb_printf(&sb, "?%d", in->op);
        }
        size_t w = sb.len - start;
        if (w < 48) pw_sb_printf(&sb, "%*s", (int)(48 - w), "");
        pw_sb_printf(&sb, " ; %s\n", p->names[p->code_name[pc]]);
    }
    return pw_sb_finish(&sb, out);
}
