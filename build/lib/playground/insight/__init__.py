"""Looking inside a model: attention maps, the articles' figures, runs compared, and the plotly figures."""
