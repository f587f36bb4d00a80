#pragma once
// The report kinds' renderers and the sections they share.
#include <string>

#include <nlohmann/json.hpp>

#include "report/html.hpp"
#include "report/plot.hpp"

namespace epo::report::detail {

std::string render_plan(const nlohmann::json& doc, const std::string& where);
std::string render_prediction(const nlohmann::json& doc, const std::string& where);
std::string render_measurement(const nlohmann::json& doc, const std::string& where);
std::string render_calibration(const nlohmann::json& doc, const std::string& where);
std::string render_published(const nlohmann::json& doc, const std::string& where);
std::string render_check_log(const nlohmann::json& doc, const std::string& where);

/// "qwen3-30b-a3b on 16 x h100-sxm: tp1 pp1 vpp1 cp1 ep16 etp1 dp16, mbs 1, gbs 512, seq 4096;
/// alltoall, overlap off" from a configuration record.
std::string config_line(const nlohmann::json& config, const std::string& where);
/// Step time, baseline, gain, exposed communication, throughput, MFU, memory: a table.
void prediction_summary(Page& page, const nlohmann::json& prediction, const std::string& where);
/// Memory per GPU as stacked bars (the fullest pipeline rank by component, the others as
/// totals) against the capacity.
void memory_chart(Page& page, const nlohmann::json& prediction, const std::string& where);
/// The lanes and boxes of a timeline record (timeline_json), times shifted by `shift_us`;
/// `exposed`: EP communication not covered by compute, as highlights.
TimelineSpec timeline_spec(const nlohmann::json& timeline, const std::string& where,
                           double shift_us = 0);
/// Base op kind of an op name ("dispatch.fwd" -> "dispatch").
std::string op_kind(const std::string& name);
/// Spans of EP communication (dispatch/combine on the comm lane) that no compute box covers,
/// added to spec.highlights on the comm lane.
void mark_exposed(TimelineSpec& spec, int compute_lane, int comm_lane);
/// The timeline of a record: the whole step, the middle of it, and one step's op breakdown.
void timeline_section(Page& page, const nlohmann::json& timeline, const std::string& where,
                      const std::string& what);
/// A window of about `num_ops` ops around the middle of the timeline (the steady state).
void middle_window(const TimelineSpec& spec, int num_ops, double& t0, double& t1);

}  // namespace epo::report::detail
