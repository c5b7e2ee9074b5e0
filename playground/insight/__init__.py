"""Looking inside a model: the articles' figures, attention heatmaps, runs compared, and the plotly figures."""
