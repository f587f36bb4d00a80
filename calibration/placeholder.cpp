// Replaced as calibration lands.
namespace epo::calib {}
