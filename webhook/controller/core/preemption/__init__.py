"""Making room: the units that may go (`candidates`), the victim order (`criteria`), lower
bounds on what evicting costs (`costs`), domains ranked by it (`ranking`), the cheapest
victims that let a gang fit (`planning`), and the disruption budgets they must respect
(`budgets`)."""
