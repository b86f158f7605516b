"""Offers: how the node's chips are offered, as devices of one or more extended resources; the faces
read them through :class:`~.book.OfferBook` and know nothing of how the devices were made.
"""
