package console

// ChartLibrary returns the vendored uPlot script and style sheet, for other
// pages that draw the same charts offline (berth bench --html).
func ChartLibrary() (js, css []byte) {
	js, _ = assets.ReadFile("assets/uPlot.iife.min.js")
	css, _ = assets.ReadFile("assets/uPlot.min.css")
	return js, css
}
