// Replaced as the planner lands.
namespace epo::planner {}
