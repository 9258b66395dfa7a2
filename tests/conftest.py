"""Every call of compiled C in the test suite runs twice from the same inputs: on one thread
(``NPUKIT_THREADS=1``), then on two with every loop split between them, however small
(``NPUKIT_THREADS=2 NPUKIT_GRAIN=1``: fused loops, parallel loops and the cores of parallel
basic kernels). The written arrays must come out the same bytes, so every kernel the suite
runs in C gives the same results whatever the thread count; the second run's result is
the one the test sees (and compares with the simulator, where it does). A test that counts
what the C prints marks itself ``@pytest.mark.c_once``: its calls run once, on two threads."""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager

import numpy as np
import pytest

from npukit.c.runtime import Compiled
from npukit.tiler import graph_c

# The suite tests the planner: every load plans (tests/test_plan_cache.py turns the plan cache
# on where it tests it).
os.environ["NPUKIT_PLAN_CACHE"] = "0"

ONE = {"NPUKIT_THREADS": "1", "NPUKIT_GRAIN": None}
TWO_SPLIT = {"NPUKIT_THREADS": "2", "NPUKIT_GRAIN": "1"}


@contextmanager
def environment(values: dict[str, str | None]):
    saved = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


ONCE = {"now": False}  # set while a test marked c_once runs


def pytest_configure(config):
    config.addinivalue_line("markers", "c_once: run compiled C once (it prints what it does)")


@pytest.fixture(autouse=True)
def c_once(request):
    ONCE["now"] = request.node.get_closest_marker("c_once") is not None
    yield
    ONCE["now"] = False


# Calls from several Python threads at once (the cores of silu_fp16_on_cores) take turns
# here: each sets NPUKIT_THREADS for its two runs and restores it.
THREAD_SWITCH = threading.RLock()


def at_one_and_two_threads(run, written: list[np.ndarray], what: str):
    """``run()`` on one thread, the written arrays restored, ``run()`` on two; the bytes
    written must agree."""
    with THREAD_SWITCH:
        return _at_one_and_two_threads(run, written, what)


def _at_one_and_two_threads(run, written: list[np.ndarray], what: str):
    if ONCE["now"]:
        with environment(TWO_SPLIT):
            return run()
    before = [a.copy() for a in written]
    with environment(ONE):
        run()
    one = [a.copy() for a in written]
    for a, b in zip(written, before):
        a[...] = b
    with environment(TWO_SPLIT):
        res = run()
    for k, (a, b) in enumerate(zip(written, one)):
        assert a.tobytes() == b.tobytes(), \
            f"{what}: written array {k} differs between 1 and 2 threads"
    return res


@pytest.fixture(autouse=True, scope="session")
def c_calls_at_one_and_two_threads():
    patch = pytest.MonkeyPatch()
    call, graph_run = Compiled._call, graph_c.run_c

    def compiled_call(self, arrs, last):
        return at_one_and_two_threads(lambda: call(self, arrs, last),
                                      [arrs[k] for k in self.written], self.prog.name)

    def graph_run_c(g, args):
        written = [a for n, a in args.items()
                   if g.spec.args[n].Dir != graph_c.ArgDirection.ARG_DIR_IN]
        return at_one_and_two_threads(lambda: graph_run(g, args), written, g.name)

    patch.setattr(Compiled, "_call", compiled_call)
    patch.setattr(graph_c, "run_c", graph_run_c)
    yield
    patch.undo()


# The fast subset (``pytest -m "not slow"``) is a smoke test: of each test module it keeps
# only the tests named in SMOKE below, chosen as the quickest that still exercise what the
# module tests (C compiled anew included), and every other test is marked ``slow`` here.
# A module SMOKE does not name (a new one) or whose named tests are gone (renamed) keeps its
# first test that is not marked slow, so every capability stays in the subset; a module named
# with no tests (``()``) has none quick enough and keeps none. An entry is a test's
# name in its module, with its parameters (``test_x[int8-2]``: that case) or without
# (``test_x``: every case).


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    chosen: dict[str, list] = {}
    first: dict[str, object] = {}
    for item in items:
        module, _, name = item.nodeid.partition("::")
        if item.get_closest_marker("slow") is not None:
            continue
        first.setdefault(module, item)
        wanted = SMOKE.get(module, ())
        if name in wanted or name.partition("[")[0] in wanted:
            chosen.setdefault(module, []).append(item)
    for item in items:
        module = item.nodeid.partition("::")[0]
        kept = chosen.get(module) or ([] if SMOKE.get(module) == () else [first.get(module)])
        if item.get_closest_marker("slow") is None and item not in kept:
            item.add_marker(pytest.mark.slow)


# The tests of the fast subset, module by module, and the cost that chose them: of every
# test function its quickest case, cheapest first, up to 0.3 s of each module's time on a
# first run (C compiled anew; measured 2026-12-02 on the 2-CPU machine, load 2 to 3), less
# four that each compile C of their own for 4 to 7 s (three native convolution blocks, one
# ONNX model), whose capabilities other tests kept here compile too.
SMOKE = {
    'tests/test_act_bounds.py': (
        'test_rescale_clamp_at_the_extremes[int64--1180591620717411303424-1180591620717411303424]',
        'test_clamp_to_the_output_range[uint64]',
        'test_bounds_without_an_int32_value_are_refused[2147483648-18446744073709551615]',
        'test_act_bounds',
        'test_linear_approx_clamp_beyond_int64[clamp4]',
    ),
    'tests/test_act_to_fixed.py': (
        'test_every_bfloat16_value_to_fixed_point[0-int32]',
        'test_to_fixed_errors_name_what_is_wrong',
    ),
    'tests/test_basic_kernels_conv.py': (
        'test_every_block_size_and_tail_of_a_padded_3x3_row[1-1-native]',
        'test_host_function_refuses_arrays_of_the_wrong_type_or_layout',
        'test_an_average_of_negative_zeros_is_positive_zero_in_c_and_reference',
        'test_the_host_modules_example_runs',
        'test_requantised_lanes_at_the_extremes_are_the_definition[int8-1-native]',
        'test_small_planes_take_16_features_a_vector[types0-0-0-3-8-1-0-1-1]',
        'test_a_same_3x3_row_tile_at_the_ends_of_the_zero_points[7-0-int8-127-0-plain]',
        'test_1x1_feature_tiles_take_input_features_four_at_a_time[13-0-int8--128-plain]',
        'test_a_row_at_column_stride_2[9-1-int8--128-plain]',
        'test_a_call_picks_the_copy_of_its_shape_and_passes_the_rest_as_given[False]',
    ),
    'tests/test_c_cache.py': (
        'test_load_never_calls_another_programs_object',
        'test_relative_include_directory_is_keyed_by_its_place',
        'test_compiler_that_exits_0_without_a_shared_object[for a; do [ "$prev" = -o ] && echo '
        'junk > "$a"; prev=$a; done; exit 0-does not start like a shared object]',
        'test_output_that_cannot_be_loaded_is_a_compiler_error',
        'test_read_only_cache_serves_its_entries',
        'test_file_where_the_cache_directory_should_be[the directory]',
        'test_unbalanced_quotes[NPUKIT_CC-cc "-O2]',
        'test_cache_docstring_examples',
    ),
    'tests/test_c_calls.py': (
        'test_a_copy_of_a_strided_view_moves_row_by_row',
        'test_tiles_copied_whole_and_only_read_are_read_in_place[const float * __restrict__-Fal'
        'se-False]',
        'test_call_work_is_the_cost_at_the_largest_arguments',
        'test_a_call_is_split_among_threads_when_its_work_pays[263-True]',
        'test_a_transposed_copy_moves_run_by_run[9-4-1]',
        'test_a_copy_in_any_dim_order_moves_runs',
    ),
    'tests/test_c_dtypes.py': (
        'test_float32_to_bfloat16_rounds_to_nearest_even',
        'test_to_float16_rounds_once_to_nearest_even',
        'test_literals',
        'test_copies_between_float_types',
    ),
    'tests/test_c_fused.py': (
        'test_float16_bits_widen_exactly',
        'test_float32_rounds_to_float16_bits_as_numpy',
        'test_silu_is_one_fused_loop_with_a_vectorisable_index',
        'test_narrow_lanes',
    ),
    'tests/test_c_handle.py': (
        'test_kept_on_the_program_and_used_by_run',
        'test_errors_name_the_tensor',
        'test_output_overlapping_an_input_runs_on_copies',
        'test_numbers_for_scalars_reuse_a_buffer_per_thread',
    ),
    'tests/test_c_kernels.py': (
        'test_fast_path_boundary[0-floor]',
        'test_unaligned_arrays',
        'test_new_arrays_each_call',
        'test_accumulate_max_min[max-int16]',
        'test_overlapping_views_of_one_buffer',
    ),
    'tests/test_c_lut.py': (
        'test_lookup[float32-int16-saturate-1-act]',
        'test_table_is_a_static_const_array_of_the_image',
    ),
    'tests/test_c_pieces.py': (
        'test_declarations_only_keeps_all_but_external_bodies',
        'test_a_layers_piece_reads_only_the_kernels_interface',
        'test_a_compile_error_names_the_piece_and_its_file',
    ),
    'tests/test_c_names.py': (
        "test_hostile_argument_name_is_refused_at_model_time['In1\\\\n']",
        'test_hostile_argument_type_is_refused_at_model_time[\'int; system("touch pwned"); int\']',
        'test_hostile_kernel_and_struct_names_are_refused[name]',
        'test_user_kernel_and_group_names_are_c_names[My Kernel]',
        'test_c_arguments_are_tcargs_with_distinct_names',
        'test_extern_built_directly_is_checked_before_compiling[arg name]',
        'test_types_are_written_as_parsed',
        'test_labels_and_names_cannot_escape_comments',
        'test_docstring_examples[npukit.cdecl]',
        'test_parameters_named_like_macros_get_other_c_names',
    ),
    'tests/test_c_source.py': (
        'test_every_statement_is_named',
        'test_literal_and_fused_readings',
        'test_closed_form_append_position',
        'test_source_is_deterministic',
        'test_unsupported_dtype_names_the_tensor',
        'test_fast_path_check_is_tight',
        'test_floordiv_and_mod_atoms',
        'test_docstring_examples[npukit.c.ctype]',
    ),
    'tests/test_c_threads.py': (
        'test_parallel_loop_result_does_not_depend_on_threads[2]',
        'test_parallel_loop_is_a_task_function',
        'test_parallel_body_with_internal_memory_is_refused',
        'test_cycle_model_runs_a_parallel_loop_on_the_cores',
        'test_loops_from_two_python_threads_and_a_forked_child',
        'test_chunks_are_claimed_once_and_a_late_thread_delays_nobody[9-4-2]',
        'test_loops_back_to_back_run_every_iteration_once[2]',
    ),
    'tests/test_c_tiler.py': (
        'test_sections_in_order',
        'test_every_binding_kind',
        'test_an_extern_without_c_source_names_itself',
        'test_misaligned_tensor_runs_on_an_aligned_copy',
        'test_zero_valid_rows_touch_nothing',
    ),
    'tests/test_c_toolchain.py': (
        'test_second_run_does_not_compile',
        'test_missing_compiler_says_what_to_install',
        'test_compile_error_keeps_the_source',
        'test_default_cache_dir',
    ),
    'tests/test_cli.py': (
        'test_targets_lists_every_target_with_its_memories',
        'test_demo_prints_the_layouts_section',
        'test_demo_sections_are_listed_and_run_one_at_a_time',
        'test_help_is_plain_text_and_demo_has_a_description',
        'test_a_command_is_required',
    ),
    'tests/test_cli_build.py': (
        'test_build_errors_name_what_is_wrong',
        'test_version_comes_from_the_package_metadata',
    ),
    'tests/test_cnn.py': (
        'test_exp_q15_is_within_one_lsb_everywhere',
        'test_exp_f32_is_close_to_exp',
        'test_the_two_float_exps_differ_only_in_where_they_flush_to_0',
        'test_float_softmax',
        'test_generator_errors_name_the_argument',
        'test_in_l3_flags_give_an_l3_home_when_tiled_alone',
    ),
    'tests/test_compass_suite.py': (
        'test_textual_change',
        'test_an_empty_checkout_is_refused',
    ),
    'tests/test_costs.py': (
        'test_a_call_costs_its_formula',
        'test_terms_are_linear_in_the_constants',
        'test_a_plain_number_from_a_user_cost_is_cycles_of_one_core',
        'test_unknown_family_is_named',
        'test_target_without_costs_gets_the_default_model',
        'test_costs_table_is_read_and_checked',
        'test_shipped_gap8_constants_say_where_they_come_from',
        'test_kernel_cycles_are_the_sum_of_priced_terms',
        'test_measurement_table_errors_name_row_and_column',
    ),
    'tests/test_coverage.py': (
        'test_merge_joins_a_partial_last_vector',
        'test_output_larger_than_written[kern0]',
        'test_output_rows_wider_than_written',
        'test_strided_output_rows_fully_written',
        'test_fallback_enumerates_modular_indices',
        'test_large_outputs_take_the_closed_form',
        'test_partial_is_for_outputs',
        'test_loops_with_run_time_trip_counts_write_only_the_iterations_that_run',
    ),
    'tests/test_demo_timing.py': (
        'test_timed_gives_cpu_time_beside_wall_time',
        'test_a_loaded_machine_makes_the_figures_unreliable',
        'test_a_ratio_is_never_bare',
    ),
    'tests/test_docs.py': (
        'test_fences_are_parsed',
        'test_every_block_names_its_language[README.md]',
        'test_every_python_block_runs_alone[measured.md]',
        'test_the_blocks_of_a_continued_page_run_in_order[c_backend.md]',
        'test_reference_width_tables_match_the_target_files[compass]',
        'test_the_reference_covers_programs_results_and_reports',
        'test_the_targets_page_names_every_built_in_target',
        'test_the_targets_page_explains_every_key_of_a_target_file',
        'test_docstring_examples[npukit.measure]',
        'test_the_dsl_page_has_one_row_per_builtin_and_its_own_counts',
    ),
    'tests/test_dsl.py': (
        'test_tutorial_program_is_a_program_like_any_other',
        'test_both_back_ends_implement_every_vector_op',
        'test_run_time_trip_counts',
        'test_vector_carried_across_iterations',
        'test_alloc_over_lsram_names_the_buffer',
        'test_out_of_bounds_at_build_time_names_pointer_index_extent',
        'test_lsram_out_of_bounds_and_negative_index',
        'test_gather_out_of_bounds_at_run_time_names_table_index_extent',
        "test_type_mismatches_name_both_types[out[0] = a[0] + S.cast(a[0], 'fp32')-vector type "
        'mismatch: float16x16 and float32x16]',
        'test_hostile_kernels_get_kernel_errors[k = 0\\n    for i in range(4):\\n        k = k '
        '+ 1\\n    out[k] = a[0]-`k` is reassigned in the device loop]',
        'test_build_arguments_are_checked',
        'test_subroutine_arguments_and_result_are_checked',
        'test_readable_errors_never_leak_raw_exceptions',
        'test_docs_code_blocks_run',
        'test_doctests',
    ),
    'tests/test_dsl_branch.py': (
        'test_vall_vany_steer_the_arm_taken_on_both_back_ends[none]',
        'test_a_branch_is_one_ir_statement_shown_in_the_program_text_and_costed_both_ways',
        'test_an_output_written_only_in_arms_needs_a_partial_spec',
        'test_host_calls_take_branches_as_the_public_dsl_runs_them',
        'test_merged_values_run_and_arms_leaving_early_are_refused_by_name',
        'test_a_barrier_inside_an_arm_is_refused',
        'test_vall_refuses_a_vector_of_numbers',
    ),
    'tests/test_dsl_build_errors.py': (
        'test_operands_that_differ_in_sign_are_refused_at_build',
        'test_an_immediate_must_fit_the_lane_width_signed_or_unsigned[-129-True]',
        'test_fused_multiply_adds_take_their_float_types',
        'test_python_max_and_min_are_refused_for_the_dsl_ones',
        'test_a_kernel_is_built_once_for_its_c_and_its_calls',
    ),
    'tests/test_dsl_builtins.py': (
        'test_vconcat_takes_each_part_of_each_operand_in_order[low-int8]',
        'test_vsplit_refuses_a_native_register',
        'test_vzip_interleaves_the_selected_lanes[even-float32]',
        'test_vbcast_spreads_scalars_and_lanes[int8]',
        'test_vbcast_of_a_bool_needs_lanes_and_a_lane_must_be_constant',
        'test_mask_strings_read_as_the_compass_dsl_reads_them[3T5F-TTTFFFFF]',
        'test_bad_mask_strings_are_refused_naming_the_string[3X]',
        'test_a_constant_tail_mask_past_its_lanes_is_refused',
        'test_a_lane_shift_outside_the_vector_is_refused',
        'test_setting_a_lane_changes_only_that_lane[int16]',
        'test_setting_a_lane_outside_the_vector_is_refused',
    ),
    'tests/test_dsl_builtins_arith.py': (
        'test_saturating_add_and_sub_clamp_the_exact_result[int8-int8-None]',
        'test_saturate_on_floats_and_mixed_signs_without_out_sign_are_refused',
        'test_vmull_vmulh_give_exact_products_of_each_half[uint32-uint32-u]',
        'test_reinterpret_of_other_widths_is_refused_naming_both',
        'test_math_of_integer_vectors_is_refused',
        'test_bfloat16_is_ml_dtypes_bfloat16',
        'test_i_and_u_keep_the_bits[int8]',
        "test_what_npukit_does_not_model_is_refused_naming_it[S.asm('nop')]",
    ),
    'tests/test_dsl_dot.py': (
        'test_dot_products_report_cycles_for_one_instruction_per_builtin',
        'test_integer_accumulations_saturate_the_exact_sum[ui-vqdpa-4-8]',
        'test_vqdpa_of_16_bit_floats_adds_to_the_even_lanes_and_keeps_the_odd[float16]',
        'test_4x4_matrix_products_round_the_float64_sums_once[vmma-float16-True]',
        'test_dot_products_refuse_other_types_naming_them[vdot-int32x8-int32x8-Only supports 8-'
        'bit or 16-bit integer]',
        'test_accumulations_refuse_an_accumulator_of_the_wrong_width[vdpa-int32x8-int8x32]',
        'test_matrix_products_refuse_a_non_float32_destination',
    ),
    'tests/test_dsl_literals.py': (
        'test_reinterpret_refuses_a_number_no_32_bit_type_holds',
        'test_float_and_floating_types[float16x16-True-True-True-True]',
    ),
    'tests/test_dsl_masked_reads.py': (
        'test_an_active_lane_past_the_end_is_still_refused',
    ),
    'tests/test_dsl_names.py': (
        'test_executable_c_code_and_target_names',
        'test_call_arguments_are_checked',
        'test_types_by_their_long_and_short_names',
        'test_hw_native_vdtype_fills_one_256_bit_register[int8-32]',
        'test_get_range',
        'test_rand_gives_the_type_in_range_with_its_corners',
        'test_assert_allclose_reads_as_the_public_dsl_does',
        'test_what_cannot_be_modelled_is_refused_by_name',
        'test_prim_func_takes_the_entry_flag',
        'test_doctests',
        'test_every_script_name_is_documented',
    ),
    'tests/test_dsl_ops.py': (
        'test_cast_matches_the_compass_reading[True-i32x8-bf16]',
        'test_vrint_ties_to_even_and_u16_of_negative_and_nan',
        'test_cast_to_bfloat16_rounds_once_at_every_lane_count[int32-8]',
        'test_cast_float_to_int_truncates_toward_zero[True-int32]',
    ),
    'tests/test_dsl_runtime_while.py': (
        'test_a_while_after_an_if_on_run_time_values[2-10]',
    ),
    'tests/test_dsl_scatter_transpose.py': (
        'test_vstore_scatter_stores_active_lanes_in_order_and_nothing_else[int8x32-True]',
        'test_vstore_scatter_under_a_tail_mask_leaves_the_masked_off_lanes[uint8-80]',
        'test_a_constant_mask_of_a_run_of_true_lanes_selects_as_it_says[32-16]',
        'test_vstore_scatter_costs_cycles_by_its_lanes_not_its_destination',
        'test_vstore_scatter_refuses_indices_of_another_width',
        'test_dma_transpose2d_writes_the_transposed_rows_and_leaves_the_gaps[uint8-1-7-None-Non'
        'e-True]',
        'test_dma_transpose2d_reports_cycles_and_refuses_a_stride_below_the_row',
    ),
    'tests/test_dsl_statements.py': (
        'test_vrpmax_vrpmin_and_lane_extract[uint32]',
        'test_vsl_vsr_every_shift_count[uint8]',
        'test_if_and_return_decided_at_build_time[12-True]',
        'test_a_condition_that_differs_between_iterations_is_refused',
        'test_statement_errors_name_what_is_wrong',
        'test_a_buffer_filled_element_by_element_then_read_after_the_loop',
    ),
    'tests/test_dsl_utils.py': (
        'test_double_elem_width[int8x32-int16x16]',
        'test_binary_op_result_type[int8-int8-int8]',
    ),
    'tests/test_dtypes.py': (
        'test_every_c_type_has_the_size_and_signedness_numpy_gives',
        'test_float_ness_counts_bfloat16_float16_and_float8',
        'test_ranges_are_twos_complement',
        'test_wrap32_is_the_value_modulo_2_32',
    ),
    'tests/test_easy_errors.py': (
        'test_two_alu_instructions',
        'test_two_loads_into_iram',
        'test_missing_store',
        'test_loop_past_tensor_end',
        'test_integer_index_out_of_range',
        'test_load_larger_than_iram',
        'test_alu_width_exceeded',
        'test_act_needs_subvectors',
        'test_unsupported_dtype_pair',
        'test_append_from_stray_loop',
        'test_vectorize_strided_last_dim',
        'test_unknown_and_missing_arguments',
        'test_run_checks_arrays',
        'test_target_without_a_slice',
        'test_kernel_made_by_exec',
        'test_kernel_parameters_named_k_and_target',
        'test_misspelt_method_suggests[<lambda>-s.alu.elementwise_add]',
        'test_floats_and_bools_refused_in_layouts[<lambda>-spec: shape \\\\(3.5,\\\\): dim 0 mu'
        'st be an integer, got 3.5]',
        'test_numpy_integers_and_int_shapes_accepted',
        'test_floats_and_bools_refused_as_attributes[over0-shift must be an integer, got 2.5]',
        'test_floats_and_bools_refused_in_kernels[<lambda>-KernelError-iterate: a loop count.*g'
        'ot True]',
        'test_float_bounds_accepted_on_float_partials',
        'test_zero_size_tensor_named',
        'test_append_under_a_loop_that_does_not_index_the_output',
    ),
    'tests/test_easy_kernels.py': (
        'test_seed_shapes[s10-s20]',
        'test_non_dense_outer_dims_input',
        'test_vectorized_store_needs_padding',
        'test_reduce_saturates',
        'test_reduce_when_rows_equal_act_subvectors',
        'test_tensor_views_index_like_numpy[key0]',
        'test_sub_vectors_of_a_vector_wider_than_the_act_hold_only_its_lanes[1]',
        'test_a_whole_vectorized_tensor_loads_only_its_data[5]',
    ),
    'tests/test_easy_reduce.py': (
        'test_accumulated_lanes_shrink_to_the_last_vector',
        'test_store_after_accumulation_agrees_with_append',
        'test_accumulation_lanes_through_floordiv_refused',
        'test_reduce_cols_transfer_reads_each_element_once[shape0-None]',
    ),
    'tests/test_easy_torq_dims.py': (
        'test_dim_edits_match_numpy[4-sim]',
        'test_dim_edit_errors_name_tensor_and_sizes',
        'test_torq_order_scalar_product_and_act_load[sim]',
    ),
    'tests/test_easy_torq_modes.py': (
        'test_mode_errors_name_the_mode',
    ),
    'tests/test_easy_torq_units.py': (
        'test_alu_load_passes_the_data',
        'test_alu_load_refuses_a_loop_that_would_sum',
        'test_one_value_bias_needs_float_partials',
        'test_store_of_a_constant_fills_every_element[uint8-200]',
        'test_store_of_a_constant_errors_name_what_is_wrong',
    ),
    'tests/test_easy_vocabulary.py': (
        'test_pattern_table_counts_the_compilers_files',
    ),
    'tests/test_examples.py': (
        'test_example_runs[mul_vanilla]',
        'test_all_seed_examples_present',
    ),
    'tests/test_files.py': (
        'test_special_files_are_refused_without_opening_them',
        'test_outputs_are_created_never_replaced_and_links_not_followed',
        'test_an_output_folder_is_new_or_empty',
        'test_malformed_npz_files_are_one_line',
        'test_arrays_read_back_as_numpy_writes_them',
        'test_a_subfolder_is_created_not_taken_over',
        'test_the_python_api_reads_no_fifo_as_a_model',
        'test_a_fifo_swapped_in_after_the_check_does_not_block',
    ),
    'tests/test_floats.py': (
        'test_docstring_examples',
        'test_float64_rounds_once_like_the_oracle[bfloat16]',
        'test_64_bit_integers_round_once_to_bfloat16[int64]',
        'test_scalars_keep_their_shape_and_nan_is_quiet_with_its_sign',
    ),
    'tests/test_fuzz_conversions.py': (
        'test_the_harness_sees_a_simulator_that_rounds_float_to_int',
        'test_a_store_from_uint64_past_int64_saturates_to_the_maximum[int64]',
    ),
    'tests/test_fuzz_diff.py': (
        'test_input_spec_that_broadcasts[sim]',
        'test_float_clamp_bounds_compare_like_c[nan-nan]',
        'test_float_bias_scale_for_integer_partials_is_refused[bfloat16]',
        'test_float_accumulation_adds_the_whole_alu_result[sub-100000000.0]',
    ),
    'tests/test_gap_sdk_emit.py': (
        'test_the_graph_is_written_with_the_sdk_api',
        'test_a_folder_that_is_not_empty_or_a_link_is_refused',
    ),
    'tests/test_graph.py': (
        'test_mnist_reproduces_the_documents_l2_plan',
        'test_printing_a_graph_shows_each_layers_tiles',
        'test_a_graph_tensor_is_the_plans_placement_plus_its_declaration',
        'test_constants_can_execute_from_flash',
        'test_a_model_from_the_four_budgets',
        'test_generated_files',
        "test_model_level_errors[<lambda>-no graph 'Nope']",
        "test_add_node_errors[binds1-'X', which is not]",
        'test_memory_device_sizes_are_whole_numbers[True-integer]',
        'test_memory_device_locations_are_named',
        'test_generators_take_gaps_argument_names',
    ),
    'tests/test_injection.py': (
        'test_file_names_are_plain[comment end]',
        'test_escaped_text_stays_a_comment_and_a_string',
        'test_flash_file_name_is_refused_at_model_time[NUL]',
        'test_header_and_generated_file_names_are_refused[parent dir]',
        'test_accepted_header_names_are_included',
        'test_build_header_never_overwrites_the_c_file[./k.h]',
    ),
    'tests/test_ir.py': (
        'test_map_buffers_reaches_every_view_of_every_statement_kind',
        'test_map_views_refuses_what_is_not_a_statement',
        'test_map_views_gives_each_view_to_the_function',
        'test_walk_visits_in_program_order_with_the_enclosing_loops',
        'test_the_back_ends_and_renderers_register_themselves',
        'test_program_methods_dispatch_through_the_registry',
        'test_str_is_the_ir_text_and_repr_one_line',
        'test_a_program_pickles_without_what_back_ends_keep_on_it',
        'test_an_extern_with_a_lambda_reference_refuses_to_pickle_naming_it',
    ),
    'tests/test_layout.py': (
        'test_transposed_vectorize',
        'test_coalesce_examples',
        'test_seed_vectorize_and_broadcast_2_5_7',
        'test_seed_fuse_then_vectorize_5_3_3_2',
        'test_seed_dims_of_sub_views',
        'test_dtype_names[bool]',
        'test_unknown_dtype_names[int9]',
        'test_view_refuses_a_buffer_of_another_item_size',
        'test_constructor_errors',
        'test_fuse_of_non_dense_dims',
        'test_size_1_dims_are_dense_whatever_their_stride',
        'test_vectorize_of_a_strided_last_dim',
        'test_broadcast_incompatible',
        'test_index_out_of_range[key0-1-7-5]',
        'test_too_many_indices',
        'test_bad_index_types',
        'test_dim_out_of_range',
        'test_split_with_a_non_divisor',
        'test_reshape_needing_a_copy',
        'test_view_with_a_too_small_buffer',
        'test_permute_with_a_bad_order[order0]',
        'test_regrouping_vectorized_dims',
        'test_layouts_are_immutable_values',
        'test_repr_names_the_numbers',
    ),
    'tests/test_lut_accum.py': (
        'test_ties_by_hand',
        'test_saturation_by_hand',
        'test_to_vector_rules[args0-words0]',
    ),
    'tests/test_lut_catalogue.py': (
        'test_erf_matches_math_erf',
        'test_erfc_matches_math_erfc_relatively_in_the_tail',
        'test_erf_special_values_and_shapes',
        'test_catalogue_functions_match_their_formulas[reciprocal]',
        'test_sigmoid_and_silu_do_not_overflow',
        'test_function_lookup',
    ),
    'tests/test_lut_cli.py': (
        'test_lut_prints_the_design_and_its_error_table',
        'test_lut_uses_the_catalogue_range_and_dtypes',
        'test_lut_reports_design_errors_with_exit_code_2',
        'test_lut_rejects_unknown_functions_and_suggests_close_ones',
        'test_lut_plot_to_an_unwritable_path_is_an_error[under a file]',
        'test_lut_plot_without_matplotlib_says_so',
        'test_demo_prints_the_lut_section',
        'test_demo_lut_errors_are_ones_a_reader_can_judge',
    ),
    'tests/test_lut_design.py': (
        'test_float_linear_errors_obey_the_interpolation_bounds[33-tanh]',
        'test_seed_003_grid_is_what_design_picks_for_33_entries',
        'test_integer_linear_errors_obey_bounds_with_quantisation[sample-int8-int8]',
        'test_integer_linear_parameters_follow_the_fixed_point_rules',
        'test_direct_errors_obey_the_mean_value_bound[sample-1.0-sigmoid]',
        'test_direct_signed_design_uses_a_power_of_two_bias_and_saturation',
        'test_unsigned_direct_design_has_no_bias',
        'test_out_of_range_inputs_get_the_edge_values[kwargs1]',
        'test_evaluate_goes_through_the_exact_semantics',
        'test_float_linear_kernel_scales_the_bfloat16_input_by_a_power_of_two',
        'test_ulp_is_the_spacing_of_the_output_type',
        'test_catalogue_functions_design_within_their_default_ranges',
        'test_callable_functions_are_accepted',
        'test_design_is_immutable_and_describes_itself',
        'test_design_rules[args0-kwargs0-words0]',
        'test_error_rejects_bad_points',
    ),
    'tests/test_lut_doctest.py': (
        'test_docstring_examples[cli]',
    ),
    'tests/test_lut_fit.py': (
        'test_minimax_line_equioscillates_on_a_convex_segment',
        'test_single_point_and_flat_segments_fit_a_zero_slope',
        'test_bf16_floor_and_ceil_bracket_every_value',
    ),
    'tests/test_lut_hostile.py': (
        'test_design_names_a_bad_function[<lambda>-words0]',
        'test_design_rules_for_hostile_arguments',
        'test_bias_beyond_an_unsigned_int_is_a_lut_error',
        'test_quantize_refuses_nan_for_integer_inputs_and_values_must_be_numbers',
        'test_table_sigmoid_keeps_nan_and_errors_name_their_arguments',
    ),
    'tests/test_lut_kernels.py': (
        'test_lookup_by_hand',
        'test_linear_approx_integer_by_hand',
        'test_kernel_computes_design_evaluate[reciprocal-direct-uint8]',
        'test_the_program_carries_the_table_image[True-2]',
        'test_the_simulator_reads_the_table_from_the_program',
        'test_constants_are_read_only',
        'test_act_timing_uses_the_pair_width_and_lanes_propagate',
        'test_silu_every_float16_input',
        'test_silu_table_follows_seed_004',
        'test_demo_section_runs',
        'test_misuse_fails_at_build_time_with_numbers[kern5-int16-attrs5-LutError-words5]',
        'test_kernel_structure_errors',
        'test_silu_kernel_checks_its_tensors',
        'test_lut_memory_in_targets_is_data',
        "test_a_design_result_goes_only_where_it_fits[('tanh', -4, 4, 64, {'in_dtype': 'int8',-"
        "['int16', 'int32']-['int8', 'uint16']]",
        'test_store_is_checked_like_append_and_raw_tables_still_saturate',
        'test_output_range_is_every_value_the_output_takes',
        'test_linear_approx_to_vector_rules[lut1-int8-to_vector1-words1]',
        'test_linear_approx_to_vector_refuses_a_design',
    ),
    'tests/test_lut_semantics.py': (
        'test_parallel_lookup_truncate_wraps_signed_indices_around_the_bias',
        'test_parallel_lookup_rules[x0-kwargs0-words0]',
        'test_parallel_lookup_truncate_needs_a_power_of_two_table_and_a_direct_table',
        'test_linear_approx_integer_example_by_hand',
        'test_linear_approx_float_example_by_hand_and_nan',
        'test_linear_approx_negative_step_bits_by_hand',
        'test_float32_slopes_with_zero_low_bits_equal_bfloat16_slopes',
        'test_linear_approx_minimum_step_bits[int8/int8/int8 (acc32)]',
        'test_linear_approx_rules[<lambda>-args0-words0]',
        'test_linear_type_reads_the_seed_table',
    ),
    'tests/test_lut_sigmoid.py': (
        'test_the_seed_table_holds_sigmoid_at_half_steps',
        'test_interpolated_table_is_within_about_0_01_over_the_whole_float_range',
        'test_interpolated_table_is_within_about_0_005_outside_minus_2_2',
        'test_taylor_is_good_inside_minus_2_2_and_poor_outside',
        'test_fast_sigmoid_formula',
        'test_error_table_covers_every_approach_and_range',
    ),
    'tests/test_lut_table.py': (
        'test_lut_is_immutable_and_copies_its_arrays',
        'test_lut_types_and_equality',
        'test_lut_rejects_bad_values[offsets1-None-words1]',
        'test_parallel_1_stores_values_linearly_and_8_bit_values_as_16_bit',
        'test_seed_example_32_bit_values_128_bit_banks',
        'test_partial_last_block_is_padded_to_the_bank',
        'test_linear_entries_put_the_slope_in_the_low_half_and_the_offset_in_the_high_half',
        'test_float_linear_entries_are_32_bit_with_bfloat16_slopes_in_the_high_bits',
        'test_linear_int16_pairs_interleave_four_entries_per_128_bit_bank',
        'test_from_layout_rejects_malformed_images[<lambda>-kwargs0-words0]',
        'test_from_layout_enforces_the_zero_low_mantissa_rule_for_bfloat16_slopes',
        'test_layout_rejects_bad_parameters',
    ),
    'tests/test_machine.py': (
        'test_builtin_target_names',
        'test_torq_numbers',
        'test_gap8_numbers',
        'test_engine_lookup_and_cycles',
        'test_unit_width_of_an_unknown_pair',
        'test_unknown_target',
        'test_a_target_file_of_ones_own_by_path',
        'test_targets_are_immutable',
        'test_load_target_of_a_builtin_file',
        'test_a_minimal_valid_file',
        'test_malformed_target_files[float for int]',
        'test_missing_and_unreadable_files',
    ),
    'tests/test_measure.py': (
        'test_rounds_rotate_and_spreads_are_the_rounds_median_low_high',
    ),
    'tests/test_onnx_budget.py': (
        'test_nested_loops_are_refused_before_they_are_written_out[2]',
        'test_local_functions_are_sized_before_they_are_inlined',
        'test_a_function_that_calls_itself_is_refused',
        'test_a_huge_range_is_refused_before_shape_inference[1000000000000]',
    ),
    'tests/test_onnx_cli.py': (
        'test_an_unsupported_operator_is_one_line_and_a_nonzero_exit',
        'test_bad_arguments_are_one_line',
        'test_sizes_read_as_bytes_with_binary_suffixes',
        'test_the_plan_shows_whole_onnx_names',
    ),
    'tests/test_onnx_cli_files.py': (
        'test_special_files_as_the_model_or_an_input_are_refused_at_once',
        'test_no_output_replaces_the_model_or_an_existing_file',
        'test_a_bad_output_path_is_found_before_the_run',
        'test_emit_never_follows_a_planted_link_nor_replaces_a_makefile',
        'test_malformed_npz_members_are_one_line',
        'test_workers_out_of_bounds_are_refused[-1]',
        'test_a_malformed_scheduler_is_one_line[localhost:8786]',
        'test_a_corrupt_reference_or_one_with_other_outputs_is_refused_once',
        'test_the_verdict_cannot_be_overprinted_by_a_crafted_name',
        'test_cache_clear_on_a_read_only_cache_is_one_line',
        'test_a_compile_past_the_timeout_is_a_compiler_error_naming_the_file',
        'test_an_unusable_cache_is_one_refusal_before_any_worker',
        'test_a_sweep_of_a_file_that_is_no_model_is_one_refusal',
        'test_a_trace_inside_the_emit_folder_is_refused_before_the_run',
    ),
    'tests/test_onnx_cli_plan.py': (
        'test_every_builtin_target_runs_or_is_refused_in_one_line[compass-validate]',
        'test_the_refusal_is_an_npukit_error_from_python_too',
        'test_the_trace_of_run_is_the_trace_of_the_report',
        'test_plan_prints_tiles_and_cycles_and_compiles_nothing',
        'test_plan_refuses_the_options_that_need_a_run',
        'test_l1_above_the_chip_is_refused_before_the_model_is_read[validate]',
        'test_every_budget_option_says_what_it_takes[run]',
        'test_a_graph_report_gives_microseconds_beside_cycles',
    ),
    'tests/test_onnx_control.py': (
        'test_control_flow_known_only_at_run_time_is_refused_by_name',
    ),
    'tests/test_onnx_conv_tiles.py': (
        'test_depthwise_tiles_of_features_equal_onnx_runtime[op=dwconv in=16x11x11 k=5x5 pad=2-'
        '40000]',
        'test_poolings_in_tiles_of_features_equal_onnx_runtime[op=maxpool in=20x12x12 k=2x2 str'
        'ide=2-5000]',
        'test_a_global_pooling_keeps_every_core_busy',
        'test_pointwise_and_depthwise_layers_are_not_dma_bound[op=conv in=172x25x5 out=172 k=1x'
        '1 relu=1]',
    ),
    'tests/test_onnx_folding.py': (
        'test_a_constant_index_out_of_range_is_refused_by_name',
    ),
    'tests/test_onnx_functions.py': (
        'test_an_operator_npukit_lowers_is_not_expanded',
        'test_a_random_operator_is_refused_not_expanded',
        'test_an_input_that_selects_a_shape_and_is_read_as_data_is_a_constant_operand',
    ),
    'tests/test_onnx_graph_edges.py': (
        'test_a_graph_output_written_by_identity_or_dropout[Dropout]',
        'test_qlinear_softmax_is_bit_exact[uint8-11]',
        'test_qlinear_softmax_with_another_opsets_axis_semantics_is_refused',
        'test_a_zero_dimension_in_input_shapes_is_refused_naming_the_input',
        'test_an_empty_intermediate_tensor_is_refused_naming_the_node[reshape]',
        'test_an_empty_constant_graph_output_is_refused_naming_it',
    ),
    'tests/test_onnx_grouped_kernels.py': (
        'test_float32_grouped_conv[4-1-3-k3-1-pads3-5-7-1500]',
    ),
    'tests/test_onnx_hard_act_fusions.py': (
        'test_qlinearconv_of_one_pixel_is_bit_exact[int8]',
    ),
    'tests/test_onnx_host.py': (
        'test_a_schedule_is_host_or_tiles',
    ),
    'tests/test_host_speed_paths.py': (
        'test_float_binary_operations_by_rows_match_the_simulator[5-7-9]',
    ),
    'tests/test_onnx_import.py': (
        'test_an_unsupported_operator_is_named_with_its_node',
        "test_refusals_name_the_node_attribute_and_value[indices-node 'n' \\\\(MaxPool\\\\): th"
        'e Indices output is not supported]',
        'test_dtype_option_and_unknown_inputs_are_refused',
        'test_outputs_passed_are_written_in_place_and_missing_ones_allocated',
        'test_broadcast_view_reads_as_numpy_broadcasts',
        'test_transpose_steps_compose_to_the_permutation',
    ),
    'tests/test_onnx_jobs_honest.py': (
        'test_a_model_whose_external_data_was_not_read_is_refused',
        'test_a_count_below_one_is_refused[-1]',
    ),
    'tests/test_onnx_limits.py': (
        'test_an_initializer_with_too_few_values_is_named_with_its_dims_and_count',
        'test_run_checks_inputs_before_planning',
        'test_equal_nan_and_infinity_positions_compare_as_equal',
        'test_a_folded_constant_over_the_limit_is_refused_before_it_is_allocated[nodes1-inits1-'
        "node 'Expand' \\\\(Expand\\\\): its constant output 'e' of shape \\\\[65536, 65536\\\\"
        '] would take 17179869184 B]',
        'test_a_relu_over_the_largest_memory_is_refused_at_once',
        'test_what_the_onnx_specification_refuses_is_refused_with_its_name[_opset_99-the model '
        'imports opset 99 of the ONNX operators; the newest this onnx package defines is \\\\d+'
        ']',
        'test_lrn_of_size_0_is_refused_with_its_node',
        'test_check_reports_onnx_runtimes_refusal_in_one_line',
    ),
    'tests/test_onnx_malformed.py': (
        'test_if_with_an_empty_condition',
        'test_sequence_at_with_an_empty_position',
        'test_split_to_sequence_with_split_0',
        'test_resize_with_a_non_finite_scale[nan]',
        'test_loop_with_an_empty_trip_count_or_condition[trip]',
    ),
    'tests/test_onnx_masks.py': (
        'test_mask_chain_matches_onnx_runtime[bool expand]',
    ),
    'tests/test_onnx_ops.py': (
        'test_clip_with_attributes_in_opset_6',
        'test_clip_with_min_above_max_gives_max[13]',
    ),
    'tests/test_onnx_ops_convtranspose.py': (
        'test_refusals_name_the_node_and_the_attribute[attrs3-inputs3-group=3]',
        'test_weights_given_as_a_graph_input_are_refused_without_a_value',
    ),
    'tests/test_onnx_ops_cumsum.py': (
        'test_an_axis_the_model_computes_is_refused',
    ),
    'tests/test_onnx_ops_einsum.py': (
        'test_refusals_name_the_equation[...ij,...jk->...ik-shapes0-without ellipses]',
    ),
    'tests/test_onnx_wide_rows.py': (
        'test_swin_qkv_selected_by_a_scalar_gather_tiles_the_row',
        'test_swin_shift_mask_add_tiles_the_row',
    ),
    'tests/test_onnx_embeddings.py': (
        'test_a_table_a_hundred_times_larger_costs_the_same_cycles',
        'test_index_outside_the_table_reads_the_nearest_row_on_both_back_ends',
    ),
    'tests/test_onnx_ops_gridsample.py': (
        'test_refusals_name_the_shapes[xs0-gs0-batch 1]',
    ),
    'tests/test_onnx_ops_groupnorm.py': (
        'test_refusals_name_the_groups_and_the_scale[4-6-num_groups=4 does not divide the 6 cha'
        'nnels]',
    ),
    'tests/test_onnx_ops_indexing.py': (
        'test_cast_like_to_the_same_type_is_a_view_and_to_another_is_a_cast',
        'test_a_pad_value_the_model_computes_is_refused_by_name',
    ),
    'tests/test_onnx_ops_int.py': (
        'test_clip_with_bounds_given_at_run_time_float_and_integer',
    ),
    'tests/test_onnx_ops_lp.py': (
        'test_refusals_name_the_node_and_the_attribute[LpNormalization-shape0-attrs0-p=3]',
    ),
    'tests/test_onnx_ops_math.py': (
        'test_refusals_name_the_node_and_the_attribute',
        'test_the_c_of_a_function_is_its_definition_one_statement_per_operation',
        'test_swish_of_opset_24_with_its_alpha',
    ),
    'tests/test_onnx_ops_matmul.py': (
        'test_attention_scores_and_weighted_values',
    ),
    'tests/test_onnx_ops_norm.py': (
        'test_layer_norm_over_trailing_axes_with_its_statistics[many-tiles]',
        'test_a_scale_of_another_shape_is_refused_by_name',
    ),
    'tests/test_onnx_ops_reduce.py': (
        'test_a_reduce_mean_over_the_spatial_axes_stays_a_global_pooling',
        'test_integer_data_is_refused_by_name',
    ),
    'tests/test_onnx_ops_resize.py': (
        'test_refusals_name_the_node_and_the_attribute[attrs1-antialias=1 is not supported]',
        'test_align_corners_with_a_fractional_length_is_refused',
        'test_resizing_the_channels_is_refused',
    ),
    'tests/test_onnx_ops_resize_cubic.py': (
        'test_antialias_and_integer_data_are_refused',
    ),
    'tests/test_onnx_ops_rmsnorm.py': (
        'test_refusals_name_the_attribute[attrs0-\\\\(RMSNormalization\\\\): axis=3 for a rank-'
        '3 input]',
    ),
    'tests/test_onnx_ops_select.py': (
        'test_refusals_name_the_node_and_the_values[Tile-inits0-repeats]',
    ),
    'tests/test_onnx_pytorch.py': (
        'test_quantized_reduce_mean_runs_in_integers[0]',
        'test_other_reduce_means_are_reductions[shape3-axes3]',
    ),
    'tests/test_onnx_qdq_exact.py': (),  # each test 7 to 19 s with the C cached
    'tests/test_onnx_quant.py': (
        'test_qlinearaveragepool_ceil_mode_shape[0]',
    ),
    'tests/test_onnx_read_rules.py': (
        'test_a_tensor_written_by_two_nodes_is_refused_naming_both',
        'test_a_loop_stops_on_its_bodys_condition_as_onnx_runtime[condition]',
        'test_a_loop_whose_condition_is_known_only_at_run_time_is_refused',
    ),
    'tests/test_onnx_sequences.py': (
        'test_concat_from_sequence_concatenates_or_stacks[1-0]',
        'test_what_cannot_be_resolved_is_refused_by_name',
        'test_a_sequence_input_is_no_constant_operand_and_not_taken_as_one',
    ),
    'tests/test_onnx_shapes.py': (
        'test_shape_computations_on_static_shapes_are_folded[shape_slices_and_product]',
        'test_a_shape_operand_given_as_a_graph_input_is_taken_from_constants[Reshape]',
        'test_an_input_reaching_a_shape_operand_through_arithmetic_only_selects_a_shape',
        'test_an_input_read_as_data_too_is_no_shape_operand',
        'test_a_pad_value_given_as_a_graph_input_is_refused_naming_the_node',
        "test_constants_that_do_not_match_the_model_are_refused[constants0-constants names 'nop"
        "e', which is not an input of the model \\\\(x, shape\\\\)]",
        'test_a_node_without_inputs_is_no_crash_while_folding',
    ),
    'tests/test_onnx_suites.py': (
        'test_outputs_are_compared_as_the_onnx_backend_test_compares_them[out2-want2-True]',
    ),
    'tests/test_onnx_transformers_hf.py': (),  # each model 5 to 10 s
    'tests/test_onnx_validate.py': (
        'test_validate_refuses_inputs_of_the_wrong_shape',
        'test_worst_names_the_inputs_that_differ_in_the_text_and_the_json',
        'test_the_sweep_plot_has_a_log2_l2_axis_and_a_marker_per_series',
        'test_a_sweep_prints_microseconds_beside_cycles',
    ),
    'tests/test_plan_cache.py': (
        'test_a_corrupt_entry_is_planned_again_and_rewritten[truncated]',
        'test_arrays_equal_in_bytes_are_pickled_once',
    ),
    'tests/test_planner.py': (
        'test_the_documents_mnist_numbers',
        'test_disabled_promotion_fetches_or_streams',
        'test_refusal_names_the_layer_and_the_bytes',
    ),
    'tests/test_program.py': (
        'test_print_shows_parameters_buffers_and_the_statement_tree',
        'test_print_shows_accumulation_fills_and_calls',
        'test_repr_is_one_short_line',
        'test_targets_pickle',
        'test_an_easykernel_program_pickles_and_runs_the_same[sim]',
        'test_an_autotiler_program_pickles_when_its_functions_are_module_level',
        'test_a_lambda_in_a_basic_kernel_is_refused_by_name[reference]',
    ),
    'tests/test_readme.py': (
        'test_readme_example_runs',
        'test_readme_commands_match_ci',
    ),
    'tests/test_scalar_args.py': (
        'test_numbers_of_the_arguments_kind_are_accepted[scalars2]',
        'test_other_kinds_are_refused_before_running[Add-3.0]',
        'test_integers_out_of_range_are_refused[Shift--1]',
    ),
    'tests/test_sequencing.py': (
        'test_two_kernels_through_an_intermediate_equal_numpy[sim]',
        'test_shared_parameters_must_agree_and_names_must_exist',
        'test_a_tensor_read_first_and_written_later_is_inout',
    ),
    'tests/test_sim_speed.py': (
        'test_feature_tile_is_the_one_plane_reference_over_every_feature[int8-int8-3-5-3-1-1-1-0-4-9]',
    ),
    'tests/test_sim.py': (
        'test_vectorized_beats_vanilla_by_8x',
        'test_fusing_small_dims_pays',
        'test_alu_width_accumulation_beats_act_width',
        'test_fast_forward_is_exact[kern0-shape0]',
        'test_reduce_fast_forward_is_exact',
        'test_report_counts_and_bound',
        'test_trace_is_chrome_json',
        'test_timeline_png',
        'test_junk_lanes_come_from_poison',
        'test_unwritten_output_is_a_build_error',
        'test_partial_output_keeps_the_array_contents[sim]',
        'test_rounding_mode_comes_from_the_target[half_up]',
        'test_sixteen_bit_products_and_wide_partials',
        'test_report_says_its_units',
    ),
    'tests/test_structure.py': (
        'test_the_check_sees_function_level_imports_and_cycles',
        'test_the_source_checks_see_what_they_look_for',
    ),
    'tests/test_tiler.py': (
        'test_matadd_seed_numbers',
        'test_matmax_seed_numbers',
        'test_order_1_is_refused',
        'test_even_odd_constraints[4-<lambda>]',
        'test_preferred_multiple_and_one_tile',
        'test_budget_errors_name_the_numbers',
        'test_vertical_tiles_and_orientation_override',
        'test_l3_home_streams_through_l2',
        'test_dma_overlaps_compute',
        'test_every_binding_kind',
        'test_unknown_names_are_errors',
        'test_orientation_override_transposes_by_tiles',
        'test_one_tile_buffer_is_sized_like_a_tile',
        'test_const_pointer_args_are_inputs',
    ),
    'tests/test_tiler_bounds.py': (
        'test_bounds_of_kernel_and_basic_kernel_meet',
        "test_values_outside_are_refused_before_running[args0-argument 'Shift': 8 is outside 2..7]",
        'test_immediates_are_checked_when_the_program_is_made',
        'test_bounds_that_leave_no_value_are_refused',
        'test_bounds_are_two_integers_on_an_integer_scalar[float-bounds1-integer scalar arguments]',
        'test_cnn_norm_outside_0_31_is_refused[32]',
    ),
    'tests/test_tiler_checks.py': (
        'test_binding_mistakes_fail_when_the_user_kernel_is_declared[bindings6-cargs6-words6]',
        'test_the_good_model_runs_and_matches_numpy',
        'test_argument_mistakes_fail_when_the_user_kernel_is_declared[changes5-words5]',
        'test_selectors_of_tile_places_need_a_tiled_argument',
        'test_a_pointer_to_items_of_another_size_is_refused',
        'test_declarations_are_checked',
        'test_basic_kernels_may_be_declared_after_the_user_kernel',
        "test_non_integers_are_refused_naming_the_field[KerArg 'A': W0]",
        'test_integers_are_checked_for_range_and_numpy_ints_are_integers',
        'test_group_mistakes_fail_when_the_group_is_declared[calls0-int *-words0]',
        'test_kernels_of_a_group_declare_a_shared_tensor_alike[10]',
        'test_an_indexed_c_argument_past_its_tensor_fails_at_build',
        'test_no_reference_is_refused_by_the_simulator_only',
        'test_a_tile_smaller_than_what_the_kernel_writes_is_caught_by_the_simulator',
        'test_clipped_slices_and_writes_to_inputs_are_caught',
        'test_a_failing_cost_function_names_its_kernel',
        'test_newer_generation_mistakes_fail_when_the_user_kernel_is_declared[changes0-words0]',
        'test_newer_generation_calls_of_later_basic_kernels_are_checked_at_tiling',
        'test_bounds_flow_through_newer_generation_kernels',
    ),
    'tests/test_tiler_k_tiles.py': (
        'test_a_product_no_k_tile_fits_is_refused_naming_the_layer_k_and_the_budget',
        'test_without_k_tiles_the_whole_row_form_is_kept',
        'test_a_transpose_that_fits_in_rows_keeps_its_row_tiles',
        'test_a_transpose_nothing_fits_is_refused_naming_the_sizes_and_the_budget',
        'test_an_imported_product_no_k_tile_fits_is_refused_naming_the_node',
    ),
    'tests/test_tiler_limits.py': (
        'test_an_argument_larger_than_the_largest_memory_is_refused_before_tiling',
        'test_a_line_over_the_l1_budget_fails_without_enumerating_tile_sizes',
        'test_a_kernel_that_fits_is_tiled_as_before',
    ),
    'tests/test_tiler_vocab.py': (
        'test_kerarg_pad_keeps_room_around_each_tile',
        'test_model_control_calls',
        'test_append_names_derives_a_generator_s_names',
        'test_vocabulary_errors[<lambda>-listed twice0]',
        'test_kernel_errors_name_what_is_wrong',
        'test_user_symbols_and_kernel_dimensions_bind_values',
    ),
    'tests/test_tpp_bias.py': (
        'test_the_bias_primitive_broadcasts_rows_columns_and_scalars[1-0-<lambda>]',
        'test_bias_configuration_errors_name_what_is_wrong',
        'test_strides_of_reads_numpy_layouts_as_the_tpp_strides',
    ),
    'tests/test_tpp_docs.py': (
        'test_docs_blocks_run_and_show_real_output',
    ),
    'tests/test_tpp_doctest.py': (
        'test_docstring_examples[npukit.c.threads]',
    ),
    'tests/test_tpp_einsum.py': (
        'test_einsum_equals_numpy[ii->i-shapes5]',
        'test_einsum_operation_shows_the_optimized_operation',
        'test_einsum_errors[args0-WrongDimensionError-2 operand]',
        'test_empty_operands_give_zeros',
        'test_epilogue_errors_name_what_is_wrong',
    ),
    'tests/test_tpp_eltwise.py': (
        'test_gather_and_scatter[rows]',
    ),
    'tests/test_tpp_equation.py': (
        'test_equation_simple',
    ),
    'tests/test_tpp_libxsmm.py': (
        'test_at_least_twenty_libxsmm_kinds_map_to_primitives',
        'test_unary_kind_matches_numpy_float64[gelu]',
        'test_unary_kinds_on_ieee_special_values',
        'test_comparisons_give_one_or_zero[compare_eq]',
        'test_reductions_over_rows_and_columns[reduce_max-False]',
        'test_reduction_arguments_are_checked',
        'test_unary_kinds_as_main_and_last_touch[exp]',
        'test_comparisons_as_main_primitive[compare_gt]',
        'test_docs_table_agrees_with_the_mapping',
        'test_reduction_main_errors_name_what_is_wrong',
    ),
    'tests/test_tpp_operation.py': (
        'test_design_example_against_numpy',
        'test_configuration_reads_back_with_the_tpp_names',
        'test_every_first_touch_on_the_simulator[relu]',
        'test_every_last_touch_on_the_simulator[none]',
        'test_c_back_end_against_the_oracle_with_canaries[binary add with a broadcast column]',
        'test_c_matches_the_simulator_and_costs_cycles',
        'test_lowering_is_loops_around_calls',
        "test_each_check_raises_its_error_naming_the_dimension[change0-WrongDtypeError-dtype 'f"
        "loat64' is not supported]",
        'test_k_dimension_must_not_be_shared',
        'test_call_checks_its_arrays',
        'test_repeated_calls_see_new_data_and_new_flags',
    ),
    'tests/test_tpp_optimizer.py': (
        'test_big_gemm_gets_one_block_per_thread[2]',
        'test_small_contiguous_dimensions_fuse',
        'test_kernel_splits_need_both_parts_at_least_min_kernel_size',
        'test_small_work_stays_on_one_thread',
        'test_optimize_checks_its_arguments',
    ),
    'tests/test_tpp_primitives.py': (
        'test_binary_leading_dimension_zero_repeats_a_column',
        'test_sigmoids_are_the_lut_modules_approximations',
        'test_in_place_unary_is_a_touch',
        'test_gemm_every_instruction_set_branch[-O2]',
        'test_gemm_source_names_its_variant',
        'test_primitive_errors_name_what_is_wrong',
        'test_overlapping_output_reads_the_inputs_first',
        'test_bfloat16_array_dtype_is_checked',
    ),
    'tests/test_transfers.py': (
        'test_broadcast_descriptor_repeats_elements',
        'test_fused_descriptor',
        'test_reduce_descriptors_cover_each_element_once',
        'test_append_limit_when_output_is_partial',
        'test_append_into_a_shorter_output_is_refused',
    ),
    'tests/test_wording.py': (
        'test_the_scan_tells_documents_from_random_seeds',
        'test_user_facing_text_names_systems_not_seeds[README.md]',
        'test_help_texts_name_systems',
    ),
    'tests/tiler_real/test_gap_c.py': (
        'test_matmult_file_has_the_real_tools_numbers',
        'test_gru_file_has_the_real_tools_numbers',
        'test_emitted_files_compile_on_the_host_without_warnings',
        'test_a_parallel_kernel_needs_its_argument_struct',
    ),
    'tests/tiler_real/test_real_cases.py': (
        'test_the_collection',
        'test_tiling_matches_the_generated_file[dronet_add_1]',
        'test_the_version_picks_the_rules',
        'test_a_mixed_space_as_the_autotiler_library_tiles_it',
        'test_runs_equal_to_numpy[FrontNetPorting_MedParConv_1x1_S2_7-sim]',
        'test_builtin_generators_reproduce_the_mnist_file[mnist_linear]',
        'test_builtin_generators_run_the_mnist_layers_equal_to_numpy[mnist_linear-sim]',
    ),
}
