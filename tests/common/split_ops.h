/* The splitting ops of the graphs the tests read: the model's attention
 * (the op table's splitting op) and vLLM's two, as vLLM's graphs name
 * them. pw_split takes them as a parameter: the graph layer knows no op
 * names. */
#ifndef PW_TEST_SPLIT_OPS_H
#define PW_TEST_SPLIT_OPS_H

static const char *const test_split_ops[] = {"attention", "unified_attention",
                                             "unified_attention_with_output"};
#define TEST_SPLIT_OPS test_split_ops, (int)(sizeof test_split_ops / sizeof test_split_ops[0])

#endif
